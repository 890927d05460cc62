"""The simulated hosts' `ib_write_bw` (perftest): rates from the simulated fabric, output in perftest's format.

A server (`ib_write_bw -d HCA -i PORT -p TCP --report_gbits -D S`) waits for its client; a client (the same
with the server's host name last) finds it, runs for S seconds and both print the report. The rate is the
fabric's: the slowest trained link on the flow's path (line rate x trained width), divided by the number of
flows that share the path's busiest directed link at the same time, lowered on links the fabric faults file
marks lossy; the path is walked through the switches' real forwarding tables (read from ibsim with
`ibnetdiscover` and `dump_lfts`, again for each new stage) with the same code the planner uses. A flow
over a lossy link also raises that port's symbol and receive error counters in ibsim (PerformanceSet).
`timeout -k K T` in front is honoured (the run is cut at T). `pkill ... ib_write_bw .*-p PORT` ends this
host's flows on those ports. Per-host faults (`perftest:` in the faults file): exit_early, garbage,
hang, drop.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabric.burnin.lft import parse_lfts
from fabric.burnin.rates import line_rate_gbps
from fabric.burnin.routes import Hca, Routing, Unknown, build_routing, route_from, uplink_index
from fabric.design import load_design
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from fabric.ports.counters import parse_perfquery
from fabric.topology import End
from sim.asbuilt import AsBuilt
from sim.ibfabric.diags_prefix import run_sim_tool, sim_env
from sim.sshhosts.linkfaults import LinkFaults

EFFICIENCY = 0.982  # ib_write_bw reaches ~98% of the link's data rate (UFM showed > 97% at Imbue)
MSG_BYTES = 65536
_PKILL = re.compile(r"ib_write_bw \.\*-p (\d+)")
BAR = "-" * 87


@dataclass(frozen=True)
class Invocation:
    hca: str
    ib_port: int
    tcp_port: int
    duration_s: float
    gpu: int | None
    server: str | None
    cut_at: float | None  # `timeout T`


def parse_invocation(command: str) -> Invocation | None:
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    cut = None
    if argv[:1] == ["timeout"]:
        rest = argv[1:]
        while rest and rest[0].startswith("-"):
            rest = rest[2:] if rest[0] in ("-k", "-s") else rest[1:]
        if not rest:
            return None
        cut, argv = float(rest[0]), rest[1:]
    if argv[:1] != ["ib_write_bw"]:
        return None
    opts: dict[str, str] = {}
    positional: list[str] = []
    it = iter(argv[1:])
    for a in it:
        if a.startswith("--use_cuda="):
            opts["cuda"] = a.split("=", 1)[1]
        elif a in ("-d", "-i", "-p", "-D"):
            opts[a] = next(it, "")
        elif a.startswith("-"):
            continue
        else:
            positional.append(a)
    try:
        return Invocation(opts.get("-d", "mlx5_0"), int(opts.get("-i", "1")), int(opts.get("-p", "18515")),
                          float(opts.get("-D", "5")), int(opts["cuda"]) if "cuda" in opts else None,
                          positional[0] if positional else None, cut)
    except ValueError:
        return None


@dataclass
class Model:
    routing: Routing
    hcas: dict[str, Hca]  # "host/hca" -> Hca
    rate: dict[int, float]  # directed link index -> trained Gb/s
    lossy: dict[int, tuple[float, End, int]]  # link index -> (loss, port to count errors at, errors per flow)
    lids: dict[str, int]  # switch GUID -> LID
    loaded: float


@dataclass
class Flow:
    links: tuple[int, ...]
    start: float
    end: float
    peer_lid: int = 0  # the sender's LID, for the server's report
    done: asyncio.Future[float] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


@dataclass
class Slot:
    inv: Invocation
    host: str
    flow: asyncio.Future[Flow] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class Traffic:
    """Every running ib_write_bw of the simulated hosts, in the SSH server's one process."""

    def __init__(self, ibsim_state: Path | None, design: Path | None, faults: LinkFaults) -> None:
        self.ibsim_state = ibsim_state
        self.design = design
        self.faults = faults
        self.model: Model | None = None
        self.slots: dict[tuple[str, int], Slot] = {}
        self.flows: list[Flow] = []
        self.running: set[tuple[str, int]] = set()  # (host, tcp port) of every ib_write_bw running
        self.killed: set[tuple[str, int]] = set()
        self._load = asyncio.Lock()

    # fabric ------------------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        if self.ibsim_state is None or not self.ibsim_state.is_file():
            raise RuntimeError("no simulated fabric is running (no ibsim state file)")
        state = json.loads(self.ibsim_state.read_text())
        return sim_env(str(state["socket"]))

    async def _tool(self, argv: list[str]) -> str:
        try:
            proc = await asyncio.to_thread(run_sim_tool, argv, self._env(), 60)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{argv[0]} did not finish on the simulated fabric within 60 s") from None
        if proc.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed on the simulated fabric (rc {proc.returncode})")
        return proc.stdout

    async def fabric(self) -> Model:
        async with self._load:
            idle = not any(f.end > time.monotonic() for f in self.flows)
            if self.model is not None and not (idle and time.monotonic() - self.model.loaded > 3.0):
                return self.model
            top = parse_ibnetdiscover(await self._tool(["ibnetdiscover"]), "ibnetdiscover")
            routing = build_routing(top, parse_lfts(await self._tool(["dump_lfts"]), "dump_lfts"))
            trained = {frozenset((lk.a, lk.b)): lk for lk in top.links}
            rate = {}
            for i, dl in enumerate(routing.links):
                seen = trained.get(frozenset((dl.tail, dl.head)))
                rate[i] = (line_rate_gbps(seen.width, seen.speed) if seen else None) or 0.0
            self.model = Model(routing, {h.name: h for h in routing.hcas}, rate, self._lossy(routing),
                               {g: n.lid for g, n in top.nodes.items() if n.lid is not None}, time.monotonic())
            return self.model

    def _lossy(self, routing: Routing) -> dict[int, tuple[float, End, int]]:
        if not self.faults.lossy or self.design is None:
            return {}
        built = AsBuilt.from_design(load_design(self.design))
        out: dict[int, tuple[float, End, int]] = {}
        for f in self.faults.lossy:
            p = f.design_port
            at = End(built.guid_of(p.node), p.port)
            for i, dl in enumerate(routing.links):
                if at in (dl.tail, dl.head):
                    out[i] = (f.loss, at, f.symbol_errors)
        return out

    # flows --------------------------------------------------------------------------------------
    def path(self, model: Model, src: Hca, dst: Hca) -> tuple[int, ...] | str:
        up = uplink_index(model.routing).get(src.end)
        if up is None:
            return f"{src.name} has no link"
        route = route_from(model.routing, model.routing.switch_index[src.leaf.guid], dst, {})
        return route.reason if isinstance(route, Unknown) else (up, *route)

    def rate(self, model: Model, flow: Flow) -> float:
        share = 1
        for link in flow.links:
            n = sum(1 for f in self.flows if link in f.links and f.start < flow.end and f.end > flow.start)
            share = max(share, n)
        base = min(model.rate.get(i, 0.0) for i in flow.links)
        kept = 1.0
        for i in flow.links:
            if i in model.lossy:
                kept *= 1.0 - model.lossy[i][0]
        return round(base * EFFICIENCY * kept / share, 2)

    async def raise_counters(self, model: Model, flow: Flow) -> None:
        if self.ibsim_state is None:
            return
        console = json.loads(self.ibsim_state.read_text()).get("console")
        for i in flow.links:
            if i not in model.lossy or not console:
                continue
            _loss, at, errors = model.lossy[i]
            lid = model.lids.get(at.guid)
            if lid is None or errors == 0:
                continue
            sweep = parse_perfquery(await self._tool(["perfquery", str(lid), str(at.port)]))
            now = next(iter(sweep.values.values()), {})
            kind = "S" if at.guid in model.routing.switch_index else "H"
            lines = [f'PerformanceSet "{kind}-{at.guid}"[{at.port}] PortCounters.SymbolErrorCounter='
                     f"{now.get('symbol_errors', 0) + errors}\n",
                     f'PerformanceSet "{kind}-{at.guid}"[{at.port}] PortCounters.PortRcvErrors='
                     f"{now.get('rcv_errors', 0) + max(1, errors // 4)}\n"]
            fd = os.open(console, os.O_WRONLY | os.O_NONBLOCK)
            try:
                for line in lines:
                    os.write(fd, line.encode())
            finally:
                os.close(fd)

    def kill(self, host: str, command: str) -> bool:
        """`pkill ... ib_write_bw .*-p PORT`: end this host's flows on those ports; False if not such a command."""
        if "pkill" not in command or "ib_write_bw" not in command:
            return False
        for port in {int(p) for p in _PKILL.findall(command)}:
            if (host, port) in self.running:
                self.killed.add((host, port))
        return True


def report(inv: Invocation, gbps: float, local_lid: int, remote_lid: int, duration: float) -> str:
    iters = int(gbps * 1e9 * duration / (MSG_BYTES * 8))
    mpps = gbps * 1e9 / (MSG_BYTES * 8) / 1e6
    cuda = ("initializing CUDA\n" f"Picking device No. {inv.gpu}\n" "creating CUDA Ctx\n"
            f"cuMemAlloc() of a {2 * MSG_BYTES * 128} bytes GPU buffer\n") if inv.gpu is not None else ""
    wait = ("\n************************************\n* Waiting for client to connect... *\n"
            "************************************\n") if inv.server is None else ""
    return (f"{cuda}{wait}{BAR}\n                    RDMA_Write BW Test\n"
            f" Dual-port       : OFF\t\tDevice         : {inv.hca}\n"
            " Number of qps   : 1\t\tTransport type : IB\n Connection type : RC\t\tUsing SRQ      : OFF\n"
            " PCIe relax order: ON\n ibv_wr* API     : ON\n"
            + (" TX depth        : 128\n" if inv.server is not None else "")
            + " CQ Moderation   : 100\n Mtu             : 4096[B]\n Link type       : IB\n"
            " Max inline data : 0[B]\n rdma_cm QPs\t : OFF\n Data ex. method : Ethernet\n"
            f"{BAR}\n local address: LID {local_lid:#06x} QPN 0x0050 PSN 0xddd611\n"
            f" remote address: LID {remote_lid:#06x} QPN 0x0050 PSN 0xa3c746\n{BAR}\n"
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
            f" {MSG_BYTES:<10d} {iters:<16d} 0.00               {gbps:.2f}  \t\t   {mpps:.6f}\n{BAR}\n")


async def wait_closed_or(process: Any, seconds: float, stop: Any = None) -> bool:
    """Sleep `seconds`; False as soon as the client went away or `stop()` is true (killed)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if process.is_closing() or (stop is not None and stop()):
            return False
        await asyncio.sleep(min(0.1, max(0.0, end - time.monotonic())))
    return not process.is_closing()

