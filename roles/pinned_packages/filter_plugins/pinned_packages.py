"""Filter `pinned_packages_decide`: what a package set needs, from `dpkg-query --show` output.

Runs on the controller, over the snapshot the host_state role read once per play: it returns the apt
specs of the packages that are missing or at another version than the pin, the packages still to hold,
and the packages held at another version with the message (and the `apt-mark unhold` to run) that the
role stops the host with, instead of apt's generic "held packages were changed". A set with an apt
preferences file of its own (`pinned_packages_preferences`) moves packages it pinned and held itself
(`upgrade`: held at the version that file pins) and renders that file (`preferences`). The decisions are
pure functions (`decide`, `upgrade`, `preferences`), unit-tested in tests/ansible/test_helper_modules.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


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


def pinned_packages_decide(query: str, packages: Iterable[Mapping[str, Any]], hold: bool = True,
                           owner: str = "") -> dict[str, Any]:
    """{install, hold, installed, wrong_holds, wrong_holds_message} for `packages` ({name, version})."""
    decision = decide(packages, query, hold=hold)
    return {
        "install": list(decision.install),
        "hold": list(decision.hold),
        "installed": decision.installed,
        "wrong_holds": [{"name": name, "have": have, "want": want} for name, have, want in decision.wrong_holds],
        "wrong_holds_message": wrong_hold_message(decision.wrong_holds, owner) if decision.wrong_holds else "",
    }


def preferences(packages: Iterable[Mapping[str, Any]], owner: str) -> str:
    """An apt preferences file pinning every versioned package at its version (priority 1001: apt moves to it,
    downgrading if need be, and never away from it)."""
    stanzas = [f"Package: {entry['name']}\nPin: version {entry['version']}\nPin-Priority: 1001\n"
               for entry in packages if entry.get("version")]
    return f"# Managed by Ansible (pinned_packages, for {owner or 'the site'})\n" + "\n".join(stanzas)


def parse_preferences(text: str) -> dict[str, str]:
    """package -> pinned version of an apt preferences file (only `Pin: version` stanzas)."""
    pins: dict[str, str] = {}
    for stanza in text.split("\n\n"):
        fields = dict(line.split(":", 1) for line in stanza.splitlines() if ":" in line and not line.startswith("#"))
        name, pin = fields.get("Package", "").strip(), fields.get("Pin", "").strip()
        if name and " " not in name and pin.startswith("version "):
            pins[name] = pin.removeprefix("version ").strip()
    return pins


def upgrade(state: Mapping[str, Any], preferences_text: str) -> dict[str, Any]:
    """{owned, install}: whether every package held at another version is held where this set's own
    preferences file pinned it (a site version bump, moved on purpose), and the specs to install then."""
    pins = parse_preferences(preferences_text)
    wrong = list(state.get("wrong_holds", []))
    owned = bool(wrong) and all(w["name"] in pins and matches(w["have"], pins[w["name"]]) for w in wrong)
    return {"owned": owned, "install": list(state.get("install", [])) + [f"{w['name']}={w['want']}" for w in wrong]}


def pinned_packages_preferences(packages: Iterable[Mapping[str, Any]], owner: str = "") -> str:
    return preferences(packages, owner)


def pinned_packages_upgrade(state: Mapping[str, Any], preferences_text: str = "") -> dict[str, Any]:
    return upgrade(state, preferences_text)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"pinned_packages_decide": pinned_packages_decide,
                "pinned_packages_preferences": pinned_packages_preferences,
                "pinned_packages_upgrade": pinned_packages_upgrade}
