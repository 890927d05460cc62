"""The simulated UFM's view of the ibsim fabric: it is the subnet manager (the real `opensm -o` sweeps),
watches the fabric with the real tools, turns what changes into UFM events, and changes ports in-band.

- A link that vanishes from the next `ibnetdiscover` (a pulled cable, a flap) is a 329 "Link went down";
  two downs of one link within `FLAP_WINDOW_S` make the SM call its switch port unhealthy (702 FLAPPING).
- A switch port whose `SymbolErrorCounter` or `LinkDownedCounter` rose between two sweeps (`perfquery -l
  <lid> 255`, every port of a switch at once) is a 110 or 112 threshold event.
- Disable/enable go through the real `ibportstate`: a switch port over a directed route, an HCA port from
  the HCA itself (an SMP over the link being disabled loses its answer), naming its local CA and port
  (`-C ibsim0 -P <port>`, umad2sim's one CA): left to choose, libibumad opens only a port that is not
  Disabled, so the enable of a disabled HCA port failed with "can't open UMAD port"; ibsim retrains a port
  disabled through its SMA only when it is cabled again, so after both ends are enabled the link is re-cabled
  through ibsim's console.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from fabric.burnin.engine import MAX_LOG, RoutingEngine, parse_opensm_log
from fabric.diags import last_complaint
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from fabric.ports.actuate import IbPortState, PortStatus, dr_path, lids_from_ibnetdiscover
from fabric.ports.counters import parse_perfquery
from fabric.topology import End, Link, NodeType, Topology
from sim.ibfabric.diags_prefix import run_sim_tool, sim_diags, sim_env

FLAP_WINDOW_S = 300.0
STOPPING = threading.Event()  # the process is leaving (sim/ufm/server.py): no tool starts any more
SIM_CA = "ibsim0"  # the one CA umad2sim shows a tool (umad2sim.c: umad2sim_dev_create(0, "ibsim0"))


@dataclass
class SimEvent:
    id: int
    code: int
    name: str
    object_type: str
    object_name: str
    object_path: str
    severity: str
    category: str
    description: str
    at: float = field(default_factory=time.time)

    def to_rest(self) -> dict[str, Any]:
        """The 6.24 schema of GET /ufmRest/app/events (realdata/3_ufm, docs.nvidia.com ...v6242)."""
        return {"id": self.id, "name": self.name, "type": self.object_type, "event_type": str(self.code),
                "severity": self.severity, "timestamp": datetime.fromtimestamp(self.at).strftime("%Y-%m-%d %H:%M:%S"),
                "counter": "N/A", "category": self.category, "object_name": self.object_name,
                "object_path": self.object_path, "write_to_syslog": False, "description": self.description}


class SimActuator(IbPortState):
    """The SM reaches every port: an HCA over its own link (before it goes down), or from the HCA itself."""

    def reaches(self, end: End, is_switch: bool) -> bool:
        return end.guid in self.topology.nodes

    def _route(self, end: End) -> str:
        node = self.topology.nodes.get(end.guid)
        if node is not None and node.type is not NodeType.SWITCH:
            path = dr_path(self.topology, self.start, end.guid, frozenset(self.down))
            if path is not None:
                return path
        return super()._route(end)


class FabricView:
    def __init__(self, state_file: Path, timeout_s: float = 30.0, routing_engine: str = "ftree") -> None:
        state = json.loads(state_file.read_text())
        self.socket = str(state["socket"])
        self.routing_engine = routing_engine  # opensm's -R: the engines asked for, comma separated
        self.opensm_log = state_file.with_name(state_file.name + ".opensm.log")
        self.engine: RoutingEngine | None = None  # what the last sweep's log says routed the fabric
        self.console_path = Path(state["console"])
        self.timeout_s = timeout_s
        self.lock = threading.RLock()
        self.events: list[SimEvent] = []
        self.downs: dict[tuple[End, End], list[float]] = {}
        self.counters: dict[End, dict[str, int]] = {}
        self.sweep()
        self.topology = self.discover()
        self.nodes = dict(self.topology.nodes)  # every node ever seen (an HCA behind a disabled link vanishes)
        self.known_links = {(ln.a, ln.b): ln for ln in self.topology.links}
        self.cabling = dict(self.known_links)  # the cables, kept to re-cable a repaired link
        # the actuator's routes come from the capture the last look took (one ibnetdiscover serves both)
        self.actuator = SimActuator(lambda: self.text, sim_diags(self.socket))
        self._counters(self.lids)

    def tool(self, argv: list[str], sim_host: str | None = None, check: bool = False) -> str:
        proc = self._run(argv, sim_env(self.socket, sim_host), self.timeout_s)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed (rc {proc.returncode}): {last_complaint(proc)}")
        return proc.stdout

    @staticmethod
    def _run(argv: list[str], env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        if STOPPING.is_set():
            raise RuntimeError(f"{argv[0]} not run: the simulator is stopping")
        return run_sim_tool(argv, env, timeout_s)

    def discover_text(self) -> str:
        return self.tool(["ibnetdiscover"])

    def discover(self) -> Topology:
        self.text = text = self.discover_text()
        top = parse_ibnetdiscover(text, "ibnetdiscover")
        self.lids = {guid: lid for guid, lid in lids_from_ibnetdiscover(text).items()
                     if guid in top.nodes and top.nodes[guid].type is NodeType.SWITCH}
        return top

    def sweep(self) -> None:
        """What UFM's SM does after a change: assign LIDs and program routes (the real opensm, once); which
        engine routed it is read from opensm's log, as UFM's SM configuration reports it."""
        self.opensm_log.unlink(missing_ok=True)
        self._run(["opensm", "-o", "-R", self.routing_engine, "-f", str(self.opensm_log)], sim_env(self.socket), 120)
        try:
            text = self.opensm_log.read_text(errors="replace")[-MAX_LOG:]
        except OSError:
            text = ""
        self.engine = parse_opensm_log(text, "opensm.log")

    def console(self, command: str) -> None:
        with self.console_path.open("w") as fifo:
            fifo.write(command + "\n")

    def is_switch(self, guid: str) -> bool:
        node = self.nodes.get(guid)
        return node is not None and node.type is NodeType.SWITCH

    def name(self, guid: str) -> str:
        node = self.nodes.get(guid)
        return node.description if node is not None else guid

    def emit(self, code: int, name: str, otype: str, oname: str, path: str, text: str,
             severity: str = "Warning", category: str = "Hardware") -> None:
        self.events.append(SimEvent(len(self.events) + 1, code, name, otype, oname, path, severity, category, text))

    def _port_path(self, end: End) -> str:
        kind = "Switch" if self.is_switch(end.guid) else "Computer"
        return f"default(1) / {kind}: {self.name(end.guid)} / NA / {end.port}"

    def poll(self, changed: Collection[End] | None = None) -> None:
        """One look at the fabric: links gone since the last look, counters risen since the last look: of every
        switch, or after a change the stand-in made itself (`changed`: ports it disabled, enabled, unplugged) of
        the switches at either end of those ports' cables, as UFM's sweep after a change is incremental (no
        other port's counters moved; the next full look reads them, their deltas kept since their last read);
        `changed` empty: the links alone."""
        with self.lock:
            now = self.discover()
            present = {(ln.a, ln.b) for ln in now.links}
            for key, link in list(self.known_links.items()):
                if key not in present and key[::-1] not in present:
                    self._link_down(link)
                    del self.known_links[key]
            for ln in now.links:
                self.known_links.setdefault((ln.a, ln.b), ln)
            self.topology = now
            self.nodes.update(now.nodes)
            self._counters(self.lids if changed is None else self._switches_of(changed))

    def _switches_of(self, ends: Collection[End]) -> dict[str, int]:
        peers = {e: far for a, b in self.cabling for e, far in ((a, b), (b, a))}
        guids = {e.guid for e in ends} | {peers[e].guid for e in ends if e in peers}
        return {guid: lid for guid, lid in self.lids.items() if guid in guids}

    def _link_down(self, link: Link) -> None:
        a, b = link.a, link.b
        names = f"{a.guid}_{a.port}:{b.guid}_{b.port}"
        self.emit(329, "Link went down", "Link", names, f"default(1) / Link: Source {a.guid}_{a.port}  TO Dest: "
                  f"{b.guid}_{b.port}", f"Link went down: {a.guid} ({self.name(a.guid)}) : {a.port} - {b.guid} "
                  f"({self.name(b.guid)}) : {b.port}", category="Fabric_Topology")
        key = (a, b) if (a, b) <= (b, a) else (b, a)
        seen = [t for t in self.downs.get(key, []) if time.time() - t < FLAP_WINDOW_S] + [time.time()]
        self.downs[key] = seen
        if len(seen) == 2:
            sw = a if self.is_switch(a.guid) else b
            peer = b if sw == a else a
            self.emit(702, "Port Is Unhealthy", "IBPort", f"{sw.guid}_{sw.port}", self._port_path(sw),
                      f"Peer Port {self.name(peer.guid)}:{peer.port} is considered by SM as unhealthy due to "
                      "FLAPPING.", category="Fabric_Notification")

    def _counters(self, switches: dict[str, int]) -> None:
        """The counters of every port of `switches` (guid: LID; `perfquery -l <lid> 255`, LID-routed after the
        SM's sweep)."""
        swept: dict[End, dict[str, int]] = {}
        for guid, lid in switches.items():
            try:
                sweep = parse_perfquery(self.tool(["perfquery", "-l", str(lid), "255"]), "perfquery")
            except subprocess.TimeoutExpired:
                continue
            swept.update({End(guid, e.port): dict(v) for e, v in sweep.values.items() if e.port > 0})
        for end, values in swept.items():
            old = self.counters.get(end, {})
            for counter, code, text in (("symbol_errors", 110, "Symbol error counter rate threshold exceeded"),
                                        ("link_downed", 112, "Link-Downed counter delta threshold exceeded")):
                delta = values.get(counter, 0) - old.get(counter, 0)
                if delta > 0 and end.guid in self.nodes:
                    self.emit(code, text, "IBPort", f"{end.guid}_{end.port}", self._port_path(end),
                              f"{text}. Threshold is 0, calculated delta is {delta}.")
            self.counters[end] = dict(values)

    def status(self, end: End) -> PortStatus:
        import asyncio

        with self.lock:
            return asyncio.run(self.actuator.status(end))

    def set_enabled(self, end: End, enabled: bool) -> None:
        """Disable or enable one port; when both ends of a link it knew are enabled again, re-cable it."""
        import asyncio

        with self.lock:
            if end.guid in self.nodes and not self.is_switch(end.guid):
                # from the HCA itself: an SMP over its own link loses its answer when the link goes down
                action = "enable" if enabled else "disable"
                self.tool(["ibportstate", "-C", SIM_CA, "-P", str(end.port), "-D", "0", str(end.port), action],
                          sim_host=f"H-{end.guid}", check=True)
                (self.actuator.down.discard if enabled else self.actuator.down.add)(end)
            else:
                asyncio.run(self.actuator.set_enabled(end, enabled))
            if enabled:
                self._recable(end)
            self.sweep()
            self.poll({end})
            self.actuator.refresh()

    def _recable(self, end: End) -> None:
        for a, b in self.cabling:
            if end in (a, b) and not ({a, b} & self.actuator.down):
                ids = [f'"{"S" if self.is_switch(e.guid) else "H"}-{e.guid}"[{e.port}]' for e in (a, b)]
                for command in (f"Unlink {ids[0]}", f"Unlink {ids[1]}", f"Link {ids[0]} {ids[1]}"):
                    self.console(command)
                time.sleep(0.1)
