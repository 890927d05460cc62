#!/usr/bin/python
"""Refuse a Fabric Manager whose version differs from the driver's, in one task (read and compare).

Reads the installed versions of the driver's utils package and of Fabric Manager (`dpkg-query`) and
fails, saying what to fix, when their upstream versions (before the Debian revision) differ: Fabric
Manager refuses to start against another driver and the GPUs stay unusable. The comparison is a pure
function (`mismatch`), unit-tested in tests/ansible/test_helper_modules.py.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: nvidia_fabricmanager_match
short_description: Fail when Fabric Manager and the driver are at different versions
options:
  driver_package: {type: str, required: true, description: the driver package whose version counts}
  fabricmanager_package: {type: str, required: true, description: the Fabric Manager package}
author: bringup
"""

RETURN = r"""
versions: {type: list, description: "[driver version, Fabric Manager version] as dpkg-query printed them"}
"""


def mismatch(driver: str, fabricmanager: str) -> str | None:
    """The message that says what to fix when the upstream versions differ, else None."""
    if driver.split("-", 1)[0] == fabricmanager.split("-", 1)[0]:
        return None
    return (f"driver {driver} and Fabric Manager {fabricmanager} differ; Fabric Manager will not start and the "
            "GPUs stay unusable. Pin both to the same version (nvidia_driver_version)")


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]

    module = AnsibleModule(
        argument_spec={"driver_package": {"type": "str", "required": True},
                       "fabricmanager_package": {"type": "str", "required": True}},
        supports_check_mode=True,
    )
    names = [module.params["driver_package"], module.params["fabricmanager_package"]]
    rc, out, err = module.run_command(["dpkg-query", "--show", "--showformat=${Version}\\n", *names])
    versions = out.splitlines()
    if (rc != 0 or len(versions) != 2) and module.check_mode:
        # --check on a host the packages are not installed on yet: nothing to compare.
        module.exit_json(changed=False, versions=versions, msg="not installed yet (check mode)")
    if rc != 0 or len(versions) != 2:
        module.fail_json(msg=f"cannot read the versions of {' and '.join(names)}: {err.strip() or out.strip()}")
    problem = mismatch(versions[0], versions[1])
    if problem:
        module.fail_json(msg=problem, versions=versions)
    module.exit_json(changed=False, versions=versions)


if __name__ == "__main__":
    main()
