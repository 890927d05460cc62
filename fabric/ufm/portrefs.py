"""Which ports a UFM event names, as UFM names them (GUID and port, or node name and port label).

The forms seen in real captures (../shared/realdata/3_ufm):

- object path `default(34) / Switch: leaf01 / NA / 16` with `[dev_id: <guid>]`: the port the event is about;
  `Peer info: Computer: host HCA-1 / 1.` in the message: its peer.
- a 329 link event `Link [Source <guid>_<port>  TO Dest: <guid>_<port>]`, message
  `Link went down: <guid> (Switch: name) : 12 - <guid> (Computer: host HCA-1) : 1` (IBM CAST), or Imbue's
  `Link went down: (Switch:T3-E21-N-U47:1/17/1)9c0591030090e000:33 - (Switch:T4-...:1/4/2)fc6a...:8,
  cable S/N: MT2330FT09118`.
- 702 `Peer Port T2-E63-L-U37:1/19/2 is considered by SM as unhealthy due to FLAPPING.`

A port label `1/<cage>/<lane>` (a split NDR port) is logical port 2*cage - 2 + lane (`1/17/1` is 33, as the
GUID:port in the same Imbue message says); `1/<port>` is port <port>.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from fabric.parsers.common import norm_guid
from fabric.ufm.events import UfmEvent


class PortRef(NamedTuple):
    guid: str | None
    name: str | None  # the node's name as UFM shows it (switch name, "host HCA-1")
    port: int | None
    label: str | None = None  # UFM's port label ("1/17/1") when it gave one
    is_host: bool | None = None  # UFM said Computer (True) or Switch (False)

    def describe(self) -> str:
        who = self.name or (f"0x{self.guid}" if self.guid else "?")
        return f"{who}[{self.port if self.port is not None else self.label or '?'}]"


class EventPorts(NamedTuple):
    ports: tuple[PortRef, ...]
    cable_serial: str | None
    reason: str | None  # FLAPPING, MANUAL, ... of a 702


_GUID_PORT = re.compile(r"\b([0-9a-fA-F]{16})_(\d+)\b")
_IMBUE_END = re.compile(r"\((Switch|Computer):\s*([^)]*?)(?::([\d/]+))?\)\s*(?:0x)?([0-9a-fA-F]{16}):(\d+)")
_CAST_END = re.compile(r"(?:0x)?([0-9a-fA-F]{16}) \((Switch|Computer): ([^)]*)\) : (\d+)")
_PEER_INFO = re.compile(r"Peer info: (Switch|Computer): (.+?) / ([\d/]+)\.?\s*$")
_PEER_PORT = re.compile(r"Peer Port (\S+?):([\d/]+) ")
_CABLE = re.compile(r"cable S/N: ?([A-Za-z0-9_-]+)")
_REASON = re.compile(r"due to (\w+)")


def port_from_label(label: str) -> int | None:
    parts = label.strip().split("/")
    if not all(p.isdigit() for p in parts):
        return None
    nums = [int(p) for p in parts]
    if len(nums) == 3:
        return 2 * nums[1] - 2 + nums[2]
    if len(nums) == 2:
        return nums[1]
    return nums[0] if len(nums) == 1 else None


def _path_ref(ev: UfmEvent) -> PortRef | None:
    """The port the object path names (`site / Switch: name / NA / 16`), with dev_id's GUID."""
    parts = [p.strip() for p in ev.object_path.split(" / ")]
    if len(parts) < 3 or ":" not in parts[1]:
        return None
    kind, _, name = parts[1].partition(":")
    label = parts[-1] if parts[-1] != "NA" else None
    port = port_from_label(label) if label else None
    if label is not None and port is None:
        return None
    guid = norm_guid(ev.dev_id)[0] if ev.dev_id else None
    return PortRef(guid, name.strip(), port, label if label and "/" in label else None,
                   kind.strip() == "Computer")


def _guid_port_refs(text: str) -> list[PortRef]:
    return [PortRef(norm_guid(g)[0], None, int(p)) for g, p in _GUID_PORT.findall(text)]


def _named(refs: list[PortRef], named: list[PortRef]) -> list[PortRef]:
    """GUID:port references from the object path, given names from the message where they agree."""
    by_key = {(r.guid, r.port): r for r in named}
    out = [by_key.get((r.guid, r.port), r) for r in refs]
    return out + [n for n in named if (n.guid, n.port) not in {(r.guid, r.port) for r in out}]


def _link_refs(ev: UfmEvent) -> list[PortRef]:
    named = [PortRef(norm_guid(g)[0], n.strip(), int(p), lab or None, k == "Computer")
             for k, n, lab, g, p in _IMBUE_END.findall(ev.message)]
    named += [PortRef(norm_guid(g)[0], n.strip(), int(p), None, k == "Computer")
              for g, k, n, p in _CAST_END.findall(ev.message)]
    return _named(_guid_port_refs(ev.object_path), named)


def event_ports(ev: UfmEvent) -> EventPorts:
    """The ports `ev` names (the port it is about first, then its peer when the event names one)."""
    refs: list[PortRef] = []
    if ev.object_type == "Link" or ev.message.startswith("Link went down"):
        refs = _link_refs(ev)
    else:
        ref = _path_ref(ev)
        if ref is not None:
            refs.append(ref)
        else:
            refs.extend(_guid_port_refs(ev.object_path))
        m = _PEER_INFO.search(ev.message)
        if m:
            refs.append(PortRef(None, m.group(2).strip(), port_from_label(m.group(3)),
                                m.group(3) if "/" in m.group(3) else None, m.group(1) == "Computer"))
        m2 = _PEER_PORT.search(ev.message)
        if m2:
            refs.append(PortRef(None, m2.group(1), port_from_label(m2.group(2)), m2.group(2), None))
    cable = _CABLE.search(ev.message)
    reason = _REASON.search(ev.message)
    return EventPorts(tuple(refs), cable.group(1) if cable else None, reason.group(1) if reason else None)
