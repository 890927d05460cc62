"""One `ib_write_bw` session on a simulated host: the server waits for its client, the client runs the flow
over the simulated fabric (`perftest_sim.Traffic`) and both print perftest's report.

Returns (rc, stdout, stderr), or None when the session is to be dropped (the `drop` fault).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from sim.sshhosts.faults import PerftestFault
from sim.sshhosts.perftest_sim import Flow, Invocation, Slot, Traffic, report, wait_closed_or

CONNECT_WAIT_S = 10.0
Result = tuple[int, str, str] | None


async def handle(traffic: Traffic, host: str, inv: Invocation, process: Any, fault: PerftestFault | None) -> Result:
    """Either side on a faulty host misbehaves as its fault says (the client also cuts its flow short)."""
    key = (host, inv.tcp_port)
    if key in traffic.running:
        return 1, "", f" Couldn't bind to port {inv.tcp_port}: Address already in use\n"
    traffic.running.add(key)
    traffic.killed.discard(key)
    try:
        if inv.server is None:
            return _mangle(await _server(traffic, host, inv, process, fault), fault)
        return await _client(traffic, host, inv, process, fault)
    finally:
        traffic.running.discard(key)
        traffic.killed.discard(key)


def _limit(inv: Invocation, default: float) -> float:
    return min(default, inv.cut_at) if inv.cut_at is not None else default


def _mangle(result: Result, fault: PerftestFault | None) -> Result:
    if result is None or fault is None or result[0] != 0:
        return result
    if fault is PerftestFault.drop:
        return None
    if fault is PerftestFault.exit_early:
        return 1, "", " Failed to complete run_iter_bw function successfully\n"
    if fault is PerftestFault.garbage:
        return 0, result[1].replace(" 65536 ", " 6\x1b5536 ").replace(".", "\ufffd"), result[2]
    return result


async def _server(traffic: Traffic, host: str, inv: Invocation, process: Any,
                  fault: PerftestFault | None = None) -> Result:
    slot = Slot(inv, host)
    traffic.slots[(host, inv.tcp_port)] = slot
    started = time.monotonic()
    limit = _limit(inv, inv.duration_s + 120.0)

    def stop() -> bool:
        return (host, inv.tcp_port) in traffic.killed

    if fault is PerftestFault.hang:
        limit = _limit(inv, 10.0**6)
    try:
        while not slot.flow.done():
            if not await wait_closed_or(process, 0.1, stop) or time.monotonic() - started > limit:
                return _killed(inv, time.monotonic() - started >= limit)
        flow = slot.flow.result()
        while not flow.done.done() or fault is PerftestFault.hang:
            if not await wait_closed_or(process, 0.1, stop) or time.monotonic() - started > limit:
                return _killed(inv, time.monotonic() - started >= limit)
    finally:
        traffic.slots.pop((host, inv.tcp_port), None)
    if flow.done.exception() is not None:
        return 1, "", " Problems with warm up\n"
    model = traffic.model
    src_lid = model.hcas[f"{host}/{inv.hca}"].lid if model and f"{host}/{inv.hca}" in model.hcas else 0
    return 0, report(inv, flow.done.result(), src_lid, flow.peer_lid, inv.duration_s), ""


def _killed(inv: Invocation, by_timeout: bool) -> Result:
    return (124 if by_timeout else 137), "", "" if by_timeout else "Killed\n"


async def _client(traffic: Traffic, host: str, inv: Invocation, process: Any, fault: PerftestFault | None) -> Result:
    try:
        model = await traffic.fabric()
    except Exception as exc:  # the fabric is not there: as if the device were missing
        return 1, "", f" Couldn't get device attributes: {exc}\n"
    src = model.hcas.get(f"{host}/{inv.hca}")
    if src is None:
        return 1, "", f" IB device {inv.hca} not found\n Unable to find the Infiniband/RoCE device\n"
    deadline = time.monotonic() + CONNECT_WAIT_S
    slot = traffic.slots.get((inv.server or "", inv.tcp_port))
    while slot is None or slot.flow.done():
        if time.monotonic() > deadline or not await wait_closed_or(process, 0.1):
            return 1, "", (f"Couldn't connect to {inv.server}:{inv.tcp_port}\nUnable to open file descriptor for "
                           "socket connection Unable to init the socket connection\n")
        slot = traffic.slots.get((inv.server or "", inv.tcp_port))
    dst = model.hcas.get(f"{slot.host}/{slot.inv.hca}")
    path = traffic.path(model, src, dst) if dst is not None else "the server's device is not on the fabric"
    if isinstance(path, str):
        return 1, "", f" Failed to modify QP to RTR: {path}\n"
    now = time.monotonic()
    flow = Flow(path, now, now + inv.duration_s, peer_lid=src.lid)
    traffic.flows = [f for f in traffic.flows if f.end > now - 300] + [flow]
    slot.flow.set_result(flow)
    return await _run(traffic, host, inv, process, fault, flow, src.lid, dst.lid if dst else 0)


async def _run(traffic: Traffic, host: str, inv: Invocation, process: Any, fault: PerftestFault | None,
               flow: Flow, src_lid: int, dst_lid: int) -> Result:
    def stop() -> bool:
        return (host, inv.tcp_port) in traffic.killed

    run_for = inv.duration_s / 3 if fault in (PerftestFault.exit_early, PerftestFault.drop) else inv.duration_s
    if fault is PerftestFault.hang:
        run_for = 10**6
    cut = inv.cut_at is not None and inv.cut_at < run_for
    finished = await wait_closed_or(process, min(run_for, inv.cut_at or run_for), stop)
    model = traffic.model
    if not finished or cut or model is None:
        flow.done.set_exception(ConnectionError("client gone"))
        return _killed(inv, cut)
    if fault is PerftestFault.drop:
        flow.done.set_exception(ConnectionError("dropped"))
        return None
    if fault is PerftestFault.exit_early:
        flow.done.set_exception(ConnectionError("completion error"))
        return 1, "", (" Completion with error at client\n Failed status 12: wr_id 0 syndrom 0x81\n"
                       "scnt=128, ccnt=0\n Failed to complete run_iter_bw function successfully\n")
    gbps = traffic.rate(model, flow)
    flow.done.set_result(gbps)
    await traffic.raise_counters(model, flow)
    out = report(inv, gbps, src_lid, dst_lid, inv.duration_s)
    if fault is PerftestFault.garbage:
        out = out.replace(f"{gbps:.2f}", "\ufffd\x00nan").replace(" 65536 ", " 6\x1b5536 ")
    return 0, out, ""


__all__ = ["asyncio", "handle"]
