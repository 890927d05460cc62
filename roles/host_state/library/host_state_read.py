#!/usr/bin/python
"""Read a host's package and unit-file state in one module call (one task per host instead of two).

Runs `dpkg-query --show` (every package, its version and status with the hold) and `systemctl
list-unit-files` (every unit file and its enablement state, which also answers in a chroot where
systemd does not run) and returns both listings unparsed: the decisions are made on the controller by
the filters of pinned_packages and enabled_units.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: host_state_read
short_description: Read every installed package and every systemd unit file state
description:
  - Runs C(dpkg-query --show) and C(systemctl list-unit-files) and returns their output; changes nothing.
options:
  unit_patterns:
    type: list
    elements: str
    default: []
    description:
      - Shell globs of the unit files to read (C(systemctl list-unit-files PATTERN...)); empty reads every
        unit file, which costs systemd a look at every enablement link (about 0.5 s of CPU per host).
author: bringup
"""

RETURN = r"""
packages: {type: str, description: "dpkg-query lines: package TAB version TAB status"}
units: {type: str, description: "systemctl list-unit-files --no-legend lines: unit state [preset]"}
"""

# dpkg-query expands the \t and \n escapes of the format itself.
PACKAGES_ARGV = ["dpkg-query", "--show", "--showformat=${Package}\\t${Version}\\t${Status}\\n"]
UNITS_ARGV = ["systemctl", "list-unit-files", "--no-legend", "--no-pager", "--full"]


def listing_ok(rc: int, out: str, err: str, *, patterns: bool) -> bool:
    """systemctl list-unit-files exits 1 with no output when no unit file matches the patterns."""
    return rc == 0 or (patterns and rc == 1 and not out.strip() and not err.strip())


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]

    module = AnsibleModule(argument_spec={"unit_patterns": {"type": "list", "elements": "str", "default": []}},
                           supports_check_mode=True)
    patterns = list(module.params["unit_patterns"])
    listings = {}
    for key, argv in (("packages", PACKAGES_ARGV), ("units", UNITS_ARGV + patterns)):
        rc, out, err = module.run_command(argv)
        if not listing_ok(rc, out, err, patterns=key == "units" and bool(patterns)):
            module.fail_json(msg=f"{' '.join(argv[:2])} failed (rc {rc}): {err.strip()}")
        listings[key] = out
    module.exit_json(changed=False, **listings)


if __name__ == "__main__":
    main()
