"""`fabric burnin run`: each stage of a plan as `ib_write_bw` server/client pairs over SSH, with every switch
port's counters read before and after, results stored per flow and per port, resumable per stage.

A stage: read counters; start every receiver's server (at most `concurrency` sessions being set up at once,
each under its host's deadline); after a grace period start every sender's client; wait for all of them
(a host that hangs is cut off at its deadline, and the remote command is itself under `timeout`, so it dies even
when the session is lost); then on every host of the stage kill whatever this stage started there; read counters
again; write the stage's flows, port deltas and its `done` mark in one transaction. A flow is `ok` only
when both ends printed a perftest report for the right device and every switch on its path answered
`perfquery` both times; anything else is `unknown` with the reason, never a rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fabric.burnin.fabric_io import IbTools, read_counters
from fabric.burnin.history import FlowRow, History, PortRow
from fabric.burnin.perftest import (
    BASE_TCP_PORT,
    BwResult,
    BwUnknown,
    cleanup_command,
    client_command,
    parse_bw,
    server_command,
)
from fabric.counter_sweep import SwitchCounters
from provision.ssh import RemoteRun, SshSettings, run_command
from provision.ssh.errors import SshError

GpuOf = Callable[[str, str], int | None]  # (host, hca) -> GPU index for --use_cuda


@dataclass(frozen=True)
class RunOptions:
    duration_s: int = 600
    gpudirect: bool = False
    concurrency: int = 128
    start_grace_s: float = 1.0  # servers listen before clients start
    launch_window_s: float = 0.5  # a session holds its launch slot this long at most
    slack_s: float = 30.0  # a host's deadline beyond the duration
    counter_timeout_s: float = 30.0
    cleanup_timeout_s: float = 15.0


@dataclass(frozen=True)
class StageReport:
    stage: int
    flows: int
    ok: int
    unknown: int
    seconds: float


@dataclass(frozen=True)
class RunReport:
    run: int
    resumed_from: int | None  # the first stage this invocation ran, when earlier ones were done before
    stages: tuple[StageReport, ...]
    skipped: tuple[int, ...]  # stages done by an earlier invocation


def ssh_remote(settings: SshSettings) -> Callable[[str, str, float], Any]:
    async def remote(host: str, command: str, timeout_s: float) -> RemoteRun:
        return await run_command(settings.endpoint(host), settings, command, timeout_s=timeout_s,
                                 output_limit=256 * 1024)
    return remote


def _link_switches(links: Sequence[str]) -> set[str]:
    out: set[str] = set()
    for text in links:
        for end in text.split("->"):
            out.add(end.split("[", 1)[0])
    return out


def _port_rows(stage: int, before: SwitchCounters, after: SwitchCounters) -> list[PortRow]:
    rows: list[PortRow] = []
    for guid, why in sorted({**before.failed, **after.failed}.items()):
        rows.append(PortRow(stage, guid, 0, "*", None, "unknown", why))
    for end, now in sorted(after.values.items()):
        then = before.values.get(end)
        if then is None:
            continue
        for counter, value in sorted(now.items()):
            old = then.get(counter, 0)
            if value < old:
                rows.append(PortRow(stage, end.guid, end.port, counter, None, "unknown",
                                    f"{counter} went from {old} to {value}: reset during the stage"))
            elif value > old:
                rows.append(PortRow(stage, end.guid, end.port, counter, value - old, "ok", ""))
    return rows


def _outcome(flow: Mapping[str, Any], client: RemoteRun | BaseException, server: RemoteRun | BaseException,
             dead: Mapping[str, str]) -> tuple[float | None, str]:
    """(Gb/s, '') or (None, why it is unknown)."""
    for side, got, hca in (("sender", client, flow["src_hca"]), ("receiver", server, flow["dst_hca"])):
        host = flow["src_host"] if side == "sender" else flow["dst_host"]
        if isinstance(got, SshError):
            return None, f"{side} {host}: {got}"
        if isinstance(got, BaseException):
            return None, f"{side} {host}: {type(got).__name__}: {got}"
        if got.truncated:
            return None, f"{side} {host}: runaway output, cut off"
        parsed = parse_bw(got.stdout, got.rc, hca)
        if isinstance(parsed, BwUnknown):
            err = next((ln.strip() for ln in got.stderr.splitlines() if ln.strip()), "")[:200]
            return None, f"{side} {host}: {parsed.reason}" + (f" (stderr: {err})" if err else "")
        if side == "sender":
            result: BwResult = parsed
    for guid in sorted(_link_switches(flow["links"])):
        if guid in dead:
            return None, f"switch 0x{guid} did not answer perfquery: {dead[guid]}"
    return result.gbps, ""


async def run_stage(stage_no: int, flows: Sequence[Mapping[str, Any]], remote: Callable[[str, str, float], Any],
                    tools: IbTools, switches: Sequence[tuple[str, int]], gpu_of: GpuOf,
                    opts: RunOptions) -> tuple[list[FlowRow], list[PortRow]]:
    gate = asyncio.Semaphore(opts.concurrency)
    deadline = opts.duration_s + opts.slack_s

    async def launch(host: str, command: str, timeout_s: float) -> asyncio.Future[RemoteRun]:
        """Start one session; the gate bounds sessions being set up, not those running (a stage needs all of
        its servers and clients at once)."""
        async with gate:
            task: asyncio.Future[RemoteRun] = asyncio.ensure_future(remote(host, command, timeout_s))
            await asyncio.wait({task}, timeout=opts.launch_window_s)
        return task

    before = await read_counters(tools, switches, opts.counter_timeout_s)
    ports = [BASE_TCP_PORT + i for i in range(len(flows))]

    def gpu(host: str, hca: str) -> int | None:
        return gpu_of(host, hca) if opts.gpudirect else None

    servers = await asyncio.gather(*(launch(
        f["dst_host"], server_command(f["dst_hca"], int(f["dst_port"]), p, opts.duration_s,
                                      gpu(f["dst_host"], f["dst_hca"]), int(deadline + opts.start_grace_s)),
        deadline + opts.start_grace_s + 5) for f, p in zip(flows, ports, strict=True)))
    await asyncio.sleep(opts.start_grace_s)  # every server is listening (or has failed) before any client
    clients = await asyncio.gather(*(launch(
        f["src_host"], client_command(f["src_hca"], int(f["src_port"]), p, opts.duration_s,
                                      gpu(f["src_host"], f["src_hca"]), f["dst_host"], int(deadline)),
        deadline + 5) for f, p in zip(flows, ports, strict=True)))
    try:
        got_clients = await asyncio.gather(*clients, return_exceptions=True)
        got_servers = await asyncio.gather(*servers, return_exceptions=True)
    finally:
        await _cleanup(flows, ports, remote, opts)
    after = await read_counters(tools, switches, opts.counter_timeout_s)
    dead = {**before.failed, **after.failed}
    rows = []
    for f, c, s in zip(flows, got_clients, got_servers, strict=True):
        gbps, why = _outcome(f, c, s, dead)
        rows.append(FlowRow(stage_no, f["src"], f["dst"], f["src_name"], f["dst_name"], gbps,
                            "ok" if gbps is not None else "unknown", why))
    return rows, _port_rows(stage_no, before, after)


async def _cleanup(flows: Sequence[Mapping[str, Any]], ports: Sequence[int],
                   remote: Callable[[str, str, float], Any], opts: RunOptions) -> None:
    """On every host of the stage, kill what the stage started there (even after a hang or a lost session)."""
    per_host: dict[str, list[int]] = {}
    for f, p in zip(flows, ports, strict=True):
        per_host.setdefault(f["src_host"], []).append(p)
        per_host.setdefault(f["dst_host"], []).append(p)

    async def one(host: str, tcp_ports: list[int]) -> None:
        # a host that does not answer: the remote `timeout` still ends it, and its flows are already unknown
        with contextlib.suppress(SshError, OSError, TimeoutError):
            await remote(host, cleanup_command(tcp_ports), opts.cleanup_timeout_s)

    await asyncio.gather(*(one(h, ps) for h, ps in sorted(per_host.items())))


def plan_switches(plan: Mapping[str, Any]) -> list[tuple[str, int]]:
    return [(str(s["guid"]), int(s["lid"])) for s in plan.get("switches", []) if s.get("lid") is not None]


async def run_plan(plan: Mapping[str, Any], history: History, remote: Callable[[str, str, float], Any],
                   tools: IbTools, gpu_of: GpuOf, opts: RunOptions, *, kind: str = "run", night: str | None = None,
                   progress: Callable[[StageReport], None] | None = None, run: int | None = None,
                   finish: bool = True) -> RunReport:
    """Every stage of the run not done yet (the run of this plan left unfinished, else a new one; or `run`),
    as the run stored its plan (with any retry stages added since)."""
    if run is None:
        run, done = history.open_run(dict(plan), opts.duration_s, opts.gpudirect, kind=kind, night=night)
    else:
        done = history.done_stages(run)
    stored = history.run_plan(run)
    switches = plan_switches(stored)
    reports: list[StageReport] = []
    first: int | None = None
    for n, flows in enumerate(stored.get("stages", []), start=1):
        if n in done or not flows:
            continue
        first = n if first is None else first
        started = time.time()
        flow_rows, port_rows = await run_stage(n, flows, remote, tools, switches, gpu_of, opts)
        history.finish_stage(run, n, started, flow_rows, port_rows)
        ok = sum(1 for r in flow_rows if r.status == "ok")
        report = StageReport(n, len(flow_rows), ok, len(flow_rows) - ok, time.time() - started)
        reports.append(report)
        if progress is not None:
            progress(report)
    if finish:
        history.finish_run(run)
    return RunReport(run, first if done else None, tuple(reports), tuple(sorted(done)))
