#!/usr/bin/python
"""Read a package set's installed versions and holds with one `dpkg-query`, and decide what to do.

Read-only: it never installs or holds anything. It returns the apt specs of the packages that are
missing or at another version than the pin, the packages still to hold, and the packages held at
another version with the message (and the `apt-mark unhold` to run) that the role stops the host with,
instead of apt's generic "held packages were changed". The decision is a pure function (`decide`) over
dpkg-query's output, unit-tested in tests/ansible/test_helper_modules.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DOCUMENTATION = r"""
module: pinned_packages_check
short_description: Which packages of a set are missing, at another version, or not yet held
description:
  - Runs one C(dpkg-query --show) for the whole set; changes nothing.
  - Reports the packages held at a version other than their pin, with what to do about it.
options:
  packages:
    type: list
    elements: dict
    required: true
    description: Entries C({name, version}); an empty version takes any installed one, a trailing C(*) is a prefix.
  owner: {type: str, default: "", description: who sets the pins (named in the failure message)}
  hold: {type: bool, default: true, description: report the packages that are not yet held}
author: bringup
"""

RETURN = r"""
install: {type: list, description: apt specs (name or name=version) to install}
hold: {type: list, description: package names to hold (empty unless O(hold))}
installed: {type: dict, description: installed version of each package of the set that is installed}
wrong_holds: {type: list, description: "packages held at another version than their pin, as {name, have, want}"}
wrong_holds_message: {type: str, description: what to do about them ("" when there are none)}
"""

QUERY_FORMAT = "${Package}\t${Version}\t${Status}\n"


@dataclass(frozen=True)
class Decision:
    install: tuple[str, ...]
    hold: tuple[str, ...]
    installed: dict[str, str]
    wrong_holds: tuple[tuple[str, str, str], ...]  # (name, held version, pinned version)


def parse_query(text: str) -> tuple[dict[str, str], set[str]]:
    """Installed versions and held package names from dpkg-query's tab-separated output."""
    installed: dict[str, str] = {}
    held: set[str] = set()
    for line in text.splitlines():
        row = line.split("\t")
        if len(row) != 3:
            continue
        name, version, status = row
        if status.endswith(" installed"):
            installed[name] = version
        if status.startswith("hold "):
            held.add(name)
    return installed, held


def matches(have: str, want: str) -> bool:
    """An installed version satisfies a pin: equal, or the pin ends with `*` and is its prefix."""
    if not want:
        return bool(have)
    return have == want or (want.endswith("*") and have.startswith(want[:-1]))


def decide(packages: Iterable[Mapping[str, Any]], text: str, *, hold: bool) -> Decision:
    installed, held = parse_query(text)
    install: list[str] = []
    to_hold: list[str] = []
    wrong: list[tuple[str, str, str]] = []
    names: list[str] = []
    for entry in packages:
        name = str(entry["name"])
        want = str(entry.get("version") or "")
        have = installed.get(name, "")
        names.append(name)
        if name in held and have and want and not matches(have, want):
            wrong.append((name, have, want))
        elif not matches(have, want):
            install.append(f"{name}={want}" if want else name)
        if hold and name not in held:
            to_hold.append(name)
    return Decision(tuple(install), tuple(to_hold), {n: installed[n] for n in names if n in installed}, tuple(wrong))


def wrong_hold_message(wrong: Sequence[tuple[str, str, str]], owner: str) -> str:
    pins = "; ".join(f"{name} is held at {have} but {owner or 'the site'} pins {want}" for name, have, want in wrong)
    names = " ".join(name for name, _, _ in wrong)
    return (f"{pins}; drain the host, then `apt-mark unhold {names}` and re-run (or change the pin if the held "
            "version is the one you want)")


def main() -> None:
    # Imported here: importing ansible.module_utils patches sys.intern process-wide (see zfs_raidz_plan).
    from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]

    module = AnsibleModule(
        argument_spec={
            "packages": {"type": "list", "elements": "dict", "required": True},
            "owner": {"type": "str", "default": ""},
            "hold": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    packages = module.params["packages"]
    bad = [p for p in packages if not p.get("name")]
    if bad:
        module.fail_json(msg=f"every package needs a name: {bad}")
    names = [str(p["name"]) for p in packages]
    if not names:
        module.exit_json(changed=False, install=[], hold=[], installed={}, wrong_holds=[], wrong_holds_message="")
    rc, out, err = module.run_command(["dpkg-query", "--show", f"--showformat={QUERY_FORMAT}", *names])
    if rc not in (0, 1):  # 1: some package is unknown to dpkg (not installed), which is an answer
        module.fail_json(msg=f"dpkg-query failed (rc {rc}): {err.strip()}")
    decision = decide(packages, out, hold=module.params["hold"])
    module.exit_json(
        changed=False, install=list(decision.install), hold=list(decision.hold), installed=decision.installed,
        wrong_holds=[{"name": name, "have": have, "want": want} for name, have, want in decision.wrong_holds],
        wrong_holds_message=(wrong_hold_message(decision.wrong_holds, module.params["owner"])
                             if decision.wrong_holds else ""))


if __name__ == "__main__":
    main()
