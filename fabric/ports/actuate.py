"""Changing a port: the `Actuator` a port apply or re-enable drives, and its in-band form, the real
`ibportstate` (infiniband-diags), for sites without UFM.

`ibportstate -D <route> <port> query|disable|enable` reaches a switch over a directed route computed from a
fresh `ibnetdiscover` (`dr_path`), as a subnet manager's own SMPs do: it needs no LID routes, and the route
never crosses the link being changed. In-band SMPs to a host's HCA travel
over its one link, so once that link's switch port is disabled the HCA can no longer be reached from here
(nor re-enabled): in-band, a host link is disabled at its switch end only, and the ledger says so. Every
tool run has a deadline; a failed or garbled answer is an `ActuatorError` naming the port and the tool's
last line, never a silent success.
"""

from __future__ import annotations

import re
import subprocess
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from fabric.diags import Attachment, Diags, last_complaint
from fabric.errors import FabricError
from fabric.parsers.common import norm_guid
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from fabric.ports.counters import parse_perfquery
from fabric.speeds import normalise_speed, normalise_width
from fabric.toolrun import ToolOutputTooLarge
from fabric.topology import End, NodeType, Topology

_FIELD = re.compile(r"^(\w+):\.+(.*)$")
_SWITCH_PORT_LINE = re.compile(r'^\[(\d+)\].*?"([SH])-([0-9a-fA-F]+)"\[(\d+)\].*\blid (\d+)\b')
_INITIATED = re.compile(r"^# Initiated from node ([0-9a-fA-F]+)", re.M)
_SWITCH_LINE = re.compile(r'^Switch\s+\d+\s+"S-([0-9a-fA-F]+)".*\blid (\d+)')


class ActuatorError(FabricError):
    """A port could not be read or changed; names the port, the system and what it answered."""


class ActionTimeout(FabricError):
    """A change was accepted but had not finished at the deadline (a UFM job still running): it may yet
    happen, so the ledger says `job_timeout`, not failed, and the next run reads the port before acting."""


@dataclass(frozen=True)
class PortStatus:
    end: End
    phys: str  # LinkUp, Disabled, Polling, Sleep ... or "unreachable"
    logical: str | None = None  # Active, Armed, Initialize, Down
    width: str | None = None  # "4X"
    speed: str | None = None  # "HDR"

    @property
    def disabled(self) -> bool:
        return self.phys.lower() == "disabled"

    @property
    def trained(self) -> bool:
        return self.phys.lower() == "linkup"

    def describe(self) -> str:
        rate = f" {self.width or '?'} {self.speed or '?'}" if self.trained else ""
        logical = f"/{self.logical}" if self.logical else ""
        return f"0x{self.end.guid}[{self.end.port}] {self.phys}{logical}{rate}"


class Actuator(Protocol):
    via: str  # "ufm" | "ibportstate"

    def reaches(self, end: End, is_switch: bool) -> bool:
        """Whether this actuator can disable and later re-enable `end` (in-band: not a host's HCA)."""
        ...

    async def status(self, end: End) -> PortStatus: ...

    async def set_enabled(self, end: End, enabled: bool) -> str | None:
        """Change the port and return once the change is done (a UFM job followed to its end); the note
        it returns (the job, its status and how long it ran) goes to the ledger with the end."""
        ...


def parse_ibportstate(text: str, end: End) -> PortStatus:
    """`ibportstate <lid> <port> query` output: PhysLinkState, LinkState, active width and speed."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        m = _FIELD.match(line.strip())
        if m and m.group(1) not in fields:  # the first block is the port; 'MLNX ext' repeats a few names
            fields[m.group(1)] = m.group(2).strip()
    phys = fields.get("PhysLinkState")
    if not phys:
        raise ActuatorError(f"0x{end.guid}[{end.port}]: ibportstate printed no PhysLinkState (garbled answer)")
    speed = None
    for key in ("LinkSpeedExt2Active", "LinkSpeedExtActive", "LinkSpeedActive"):
        value = fields.get(key, "")
        speed = normalise_speed(value.split(" or ")[0]) if value and value[0].isdigit() else None
        if speed:
            break
    width = normalise_width(fields["LinkWidthActive"]) if fields.get("LinkWidthActive") else None
    return PortStatus(end, phys, fields.get("LinkState"), width, speed)


def lids_from_ibnetdiscover(text: str) -> dict[str, int]:
    """Node GUID -> LID: switches from their own line, HCAs from the switch port lines that reach them."""
    lids: dict[str, int] = {}
    for line in text.splitlines():
        s = line.strip()
        node = _SWITCH_LINE.match(s)
        if node:
            lids[norm_guid(node.group(1))[0]] = int(node.group(2))
            continue
        port = _SWITCH_PORT_LINE.match(s)
        if port and port.group(2) == "H":
            lids.setdefault(norm_guid(port.group(3))[0], int(port.group(5)))
    return lids


def attach_guid(text: str) -> str | None:
    """The node an ibnetdiscover capture was taken from (`# Initiated from node <guid> port <guid>`)."""
    m = _INITIATED.search(text)
    return norm_guid(m.group(1))[0] if m else None


def dr_path(topology: Topology, start: str, target: str, avoid: frozenset[End]) -> str | None:
    """The directed route `0,p1,p2,...` from `start` to node `target` over links none of whose ends is in
    `avoid` (a port being disabled, or one already disabled, carries no SMP); None when there is none."""
    if start == target:
        return "0"
    adjacency = topology.adjacency
    came: dict[str, tuple[str, int]] = {start: ("", 0)}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        for port, far in adjacency.get(here, ()):
            if far.guid in came or End(here, port) in avoid or far in avoid:
                continue
            came[far.guid] = (here, port)
            if far.guid == target:
                hops: list[int] = []
                node = target
                while node != start:
                    node, out = came[node]
                    hops.append(out)
                return ",".join(["0", *map(str, reversed(hops))])
            if topology.nodes.get(far.guid) is not None and topology.nodes[far.guid].type is NodeType.SWITCH:
                queue.append(far.guid)
    return None


class IbPortState:
    """In-band: the real `ibportstate -D <route> <port>` over directed routes from this host's attachment point
    (no subnet manager needed to reach a port, as an SM's own SMPs do), and `perfquery <lid> <port>` for
    counters. `discover` returns a fresh ibnetdiscover capture taken from `attach`, where the tools run from
    (`diags`: the site's tools, default this host's)."""

    via = "ibportstate"

    def __init__(self, discover: Callable[[], str], diags: Diags | None = None, attach: Attachment | None = None,
                 *, timeout_s: float = 10.0) -> None:
        self.discover = discover
        self.diags = diags or Diags()
        self.attach = attach
        self.timeout_s = timeout_s
        self.down: set[End] = set()  # ends this actuator disabled: no route crosses them
        self.refresh()

    def refresh(self) -> None:
        text = self.discover()
        self.topology = parse_ibnetdiscover(text, "ibnetdiscover")
        self.lids = lids_from_ibnetdiscover(text)
        start = attach_guid(text)
        if start is None:
            raise ActuatorError("ibnetdiscover did not say which node it ran from ('# Initiated from node')")
        self.start = start

    def reaches(self, end: End, is_switch: bool) -> bool:
        return is_switch and end.guid in self.topology.nodes

    def _route(self, end: End) -> str:
        link = self.topology.by_end.get(end)
        avoid = frozenset(self.down | ({link.a, link.b} if link is not None else {end}))
        path = dr_path(self.topology, self.start, end.guid, avoid)
        if path is None:
            raise ActuatorError(f"0x{end.guid}[{end.port}]: no directed route reaches this switch from "
                                f"0x{self.start} without crossing the link being changed")
        return path

    async def _tool(self, argv: list[str], what: str, partial: str | None = None) -> str:
        try:
            proc = await self.diags.run(argv, self.timeout_s, self.attach)
        except subprocess.TimeoutExpired:
            raise ActuatorError(f"{what} did not finish within {self.timeout_s:g} s") from None
        except ToolOutputTooLarge as e:
            raise ActuatorError(f"{what}: {e}") from None
        except OSError as e:
            raise ActuatorError(f"{argv[0]} could not be run: {e.strerror or e}") from None
        out = proc.stdout
        if proc.returncode != 0 and not (partial and partial in out):
            raise ActuatorError(f"{what} failed (rc {proc.returncode}): {last_complaint(proc)}")
        return out

    async def status(self, end: End) -> PortStatus:
        path = self._route(end)
        # ibportstate then reads the peer's PortInfo across the link, which fails (rc 255) once the link is
        # down: the port's own block, printed first, is the answer
        out = await self._tool(["ibportstate", "-D", path, str(end.port), "query"],
                               f"ibportstate -D {path} {end.port} query (0x{end.guid})", partial="PhysLinkState")
        return parse_ibportstate(out, end)

    async def set_enabled(self, end: End, enabled: bool) -> None:
        path = self._route(end)
        action = "enable" if enabled else "disable"
        await self._tool(["ibportstate", "-D", path, str(end.port), action],
                         f"ibportstate -D {path} {end.port} {action} (0x{end.guid})")
        (self.down.discard if enabled else self.down.add)(end)

    async def counters(self, end: End) -> Mapping[str, int]:
        """The port's error counters now (`perfquery <lid> <port>`, LID-routed: needs the SM's routes)."""
        lid = self.lids.get(end.guid)
        if lid is None:
            raise ActuatorError(f"0x{end.guid}: no LID in the discovered fabric (is the subnet manager running?)")
        out = await self._tool(["perfquery", str(lid), str(end.port)], f"perfquery {lid} {end.port}")
        sweep = parse_perfquery(out, "perfquery")
        return next(iter(sweep.values.values()), {})
