"""Port plan at Imbue's size: a day of UFM events (>= 1 million lines, bursts included) and two counter sweeps.

    .venv/bin/python bench/ports_plan_bench.py [--lines 1000000]

Input, written once to a temporary directory: the Imbue-scale design (inventory/examples/fabric, 320
switches, 4,088 HCAs) as the discovered fabric (`sim.asbuilt`, switches named `MF0;<name>:...`); an
event.log of `--lines` lines over 24 h: background events of ignored codes, 150 bad links with counted
events (329 in Imbue's message form, 110/112 threshold events, 702 FLAPPING, 917), three UFM restarts of
10,000 link-down events each; two perfquery sweeps of every switch port an hour apart.

Each side runs in its own process (so peak RSS is its own), on the same files:
- ours: `fabric.ports` readers (streaming) and `plan_ports`; wall time and peak RSS of reading + planning.
- Imbue's: their `find_problematic_events.py` logic (imbue-ai/cluster-health, ufm_events), re-implemented
  here: every line through their regex and `strptime` in Pacific time, their burst pruning (a chain of
  events each < 1 s after the previous, dropped when >= 50 long), latest event per port set for their codes,
  one disable action per port. They read no counter sweeps (their counter script reads a burn's report).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fabric.design import DesignLink  # noqa: E402

DESIGN = REPO / "inventory" / "examples" / "fabric" / "imbue-scale-design.yml"
NOW = dt.datetime(2026, 12, 1, 23, 59, 59, tzinfo=dt.UTC)
DAY_START = NOW - dt.timedelta(hours=24)
BACKGROUND = ((328, "Link went up"), (66, "New MCast group is created"), (67, "Mcast group is deleted"),
              (527, "UFM CPU usage is high"), (64, "GID address out of service"), (1500, "New cable detected"))


def _label(port: int) -> str:
    return f"1/{(port + 1) // 2}/{2 - port % 2}"


def _ts(t: dt.datetime) -> str:
    return f"{t:%Y-%m-%d %H:%M:%S.%f}"[:-3]


def _write_inputs(work: Path, lines: int) -> None:
    from fabric.design import load_design
    from fabric.topology import NodeType
    from sim.asbuilt import AsBuilt

    design = load_design(DESIGN)
    ab = AsBuilt.from_design(design, "location")
    (work / "ibnetdiscover.txt").write_text(ab.render())
    rng = random.Random(14)
    sw = [dl for dl in design.links if all(design.nodes[p.node].type is NodeType.SWITCH for p in (dl.a, dl.b))]
    guid = {name: f"{n.guid:016x}" for name, n in ab.nodes.items()}
    bad = rng.sample(sw, 150)
    with (work / "event.log").open("w") as f:
        counted = []
        for dl in bad:
            for _ in range(rng.randint(2, 30)):
                counted.append((DAY_START + dt.timedelta(seconds=rng.uniform(0, 86000)), dl))
        bursts = [DAY_START + dt.timedelta(hours=h) for h in (3, 11, 19)]
        left = lines - len(counted) - 30_000
        gap = 86_000 / left
        Item = tuple[dt.datetime, tuple[str, DesignLink] | None]
        events: list[Item] = [(DAY_START + dt.timedelta(seconds=i * gap + rng.uniform(0, gap)), None)
                              for i in range(left)]
        for b in bursts:
            events += [(b + dt.timedelta(microseconds=i * 150), ("burst", rng.choice(sw))) for i in range(10_000)]
        events += [(t, ("bad", dl)) for t, dl in counted]
        events.sort(key=lambda e: e[0])
        for n, (t, what) in enumerate(events, start=1):
            f.write(_line(t, n, what, guid, rng) + "\n")
    _write_sweeps(work, design, ab, bad, rng)


def _line(t: dt.datetime, n: int, what: tuple[str, DesignLink] | None, guid: dict[str, str],
          rng: random.Random) -> str:
    head = f"{_ts(t)} [{n}]"
    if what is None:
        code, msg = BACKGROUND[n % len(BACKGROUND)]
        return f"{head} [{code}] INFO [Fabric_Notification] Site [default(2)]: {msg}"
    kind, dl = what
    a, b = dl.a, dl.b
    code = 329 if kind == "burst" else rng.choice((329, 110, 112, 702, 917))
    if code == 329:
        return (f"{head} [329] WARNING [Fabric_Topology] Link [Source {guid[a.node]}_{a.port}  TO Dest: "
                f"{guid[b.node]}_{b.port}]: Link went down: (Switch:{a.node}:{_label(a.port)}){guid[a.node]}:{a.port}"
                f" - (Switch:{b.node}:{_label(b.port)}){guid[b.node]}:{b.port}, cable S/N: MT23{n:08d}")
    path = f"default / Switch: {a.node} / {_label(a.port)}"
    msg = {110: "Symbol error counter rate threshold exceeded.", 112: "Link-Downed counter delta threshold exceeded.",
           702: f"Peer Port {b.node}:{_label(b.port)} is considered by SM as unhealthy due to FLAPPING.",
           917: "Symbol bit error rate is high."}[code]
    return f"{head} [{code}] WARNING [Hardware] IBPort [{path}] [dev_id: {guid[a.node]}]: {msg}"


def _write_sweeps(work: Path, design: object, ab: object, bad: list[DesignLink], rng: random.Random) -> None:
    nodes = ab.nodes  # type: ignore[attr-defined]
    worse = {(dl.a.node, dl.a.port) for dl in bad[:40]}
    for name, taken in (("perfquery-before.txt", NOW - dt.timedelta(hours=1)), ("perfquery-after.txt", NOW)):
        out = [taken.isoformat()]
        for sw in design.switches():  # type: ignore[attr-defined]
            lid = nodes[sw.name].lid
            for port in range(1, sw.ports + 1):
                sym = 5000 if name.endswith("before.txt") else 5000 + (900 if (sw.name, port) in worse else 0)
                out.append(f"# Port counters: Lid {lid} port {port} (CapMask: 0x1300)")
                out += [f"PortSelect:......................{port}", "CounterSelect:...................0x0000",
                        f"SymbolErrorCounter:..............{sym}", "LinkErrorRecoveryCounter:........0",
                        "LinkDownedCounter:...............2", "PortRcvErrors:...................0",
                        "PortRcvRemotePhysicalErrors:.....0", "PortRcvSwitchRelayErrors:........0",
                        "PortXmitDiscards:................0", "PortXmitConstraintErrors:........0",
                        "PortRcvConstraintErrors:.........0", "CounterSelect2:..................0x00",
                        "LocalLinkIntegrityErrors:........0", "ExcessiveBufferOverrunErrors:....0",
                        "QP1Dropped:......................0", "VL15Dropped:.....................0",
                        f"PortXmitData:....................{rng.randint(10**9, 10**12)}",
                        f"PortRcvData:.....................{rng.randint(10**9, 10**12)}",
                        "PortXmitPkts:....................123456", "PortRcvPkts:.....................123456",
                        "PortXmitWait:....................0"]
        (work / name).write_text("\n".join(out) + "\n")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_ours(work: Path) -> dict[str, object]:
    from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
    from fabric.ports.counters import parse_counters
    from fabric.ports.plan import plan_ports
    from fabric.ufm.events import iter_event_log
    from provision.site.port_policy import PortPolicy

    t0 = time.perf_counter()
    topology = parse_ibnetdiscover((work / "ibnetdiscover.txt").read_text())
    t1 = time.perf_counter()
    sweeps = [parse_counters((work / n).read_text(), n) for n in ("perfquery-before.txt", "perfquery-after.txt")]
    with (work / "event.log").open() as f:
        plan = plan_ports(topology, iter_event_log(f, "event.log"), sweeps, [], PortPolicy(max_ports=10_000), NOW)
    t2 = time.perf_counter()
    return {"topology_s": round(t1 - t0, 2), "plan_s": round(t2 - t1, 2), "peak_rss_mb": round(_peak_mb()),
            "disable_links": len(plan.disable), "watch_links": len(plan.watch),
            "disable_ports": sum(len(pl.ends()) for pl in plan.disable), "bursts": len(plan.bursts),
            "events_scanned": plan.summary["events_scanned"], "needs_force": plan.needs_force}


# --- Imbue's find_problematic_events.py, the parts `process-logs` runs (same regexes, same rules) ---------
_ENTRY = re.compile(
    r"^(?P<timestamp>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d+) \[(?P<entry_id>\d+)\] \[(?P<message_code>\d+)\] "
    r"(?P<level>\w+) \[(?P<topic>\w+)\] (?P<device_type>\w+) \[(?P<device_description>[^\]]+)\]"
    r"( \[dev_id: (?P<device_id>\w+)\])?: (?P<message>.*)$")
_LINK_DOWN = re.compile(r"^Link went down: \(Switch:(?P<switch>[^:]+):(1/)?(?P<port>[^)]+)\)[^(]+"
                        r"\(Switch:(?P<peer_switch>[^:]+):(1/)?(?P<peer_port>[^)]+)\)")
_UNHEALTHY = re.compile(r"^Peer Port (?P<switch>[^:]+):(1/)?(?P<port>[^ ]+) is considered by SM as unhealthy "
                        r"due to \w+\.")
_THRESHOLD = (110, 112, 113, 115, 116)
_HANDLE = (110, 112, 113, 115, 116, 329, 702, 917, 918)
_IGNORE = (64, 65, 66, 67, 328, 331, 332, 336, 395, 517, 527, 603, 604, 908, 1500, 1502, 394, 907, 920, 1503)


def _imbue_port(description: str) -> tuple[str, str]:
    _default, switch, port = description.split(" / ", 2)
    return switch.removeprefix("Switch: "), port.removeprefix("1/")


def _imbue_event(e: dict[str, object]) -> tuple[tuple[str, str], ...] | None:
    code, msg, desc = e["code"], str(e["message"]), str(e["desc"])
    if code == 329:
        if "Computer" in msg or "Aggregation Node" in msg:
            return None
        m = _LINK_DOWN.match(msg)
        if m is None:
            raise ValueError(f"Message does not match expected pattern: {msg}")
        ports = [(m["switch"], m["port"]), (m["peer_switch"], m["peer_port"])]
    elif code in _THRESHOLD:
        ports = [_imbue_port(desc)]
        with contextlib.suppress(ValueError):
            ports.append(_imbue_port(msg.rstrip(".")))
    elif code == 702:
        if "MANUAL" in msg:
            return None
        ports = [_imbue_port(desc)]
        m = _UNHEALTHY.match(msg)
        if m is not None:
            ports.append((m["switch"], m["port"]))
    else:
        ports = [_imbue_port(desc)]
    if any("Computer" in s for s, _p in ports):
        return None
    return tuple(sorted(ports, key=lambda p: f"{p[0]} {p[1]}"))


def _imbue_prune(entries: list[dict[str, object]]) -> list[dict[str, object]]:
    entries = sorted(entries, key=lambda e: e["timestamp"])  # type: ignore[arg-type, return-value]
    prev, prev_start, final = [entries[0]], entries[0]["timestamp"], []
    for e in entries:
        if e["timestamp"] - prev_start < dt.timedelta(seconds=1):  # type: ignore[operator]
            prev.append(e)
            prev_start = e["timestamp"]
        else:
            if len(prev) < 50:
                final.extend(prev)
            prev, prev_start = [e], e["timestamp"]
    return final


def run_imbue(work: Path) -> dict[str, object]:
    from zoneinfo import ZoneInfo

    pacific = ZoneInfo("America/Los_Angeles")
    cutoff = (DAY_START).astimezone(pacific)
    t0 = time.perf_counter()
    entries = []
    with (work / "event.log").open() as f:
        for line in f.readlines():
            m = _ENTRY.match(line)
            if m is None:
                continue
            entries.append({"timestamp": dt.datetime.strptime(m["timestamp"], "%Y-%m-%d %H:%M:%S.%f").replace(
                tzinfo=pacific), "code": int(m["message_code"]), "desc": m["device_description"],
                "message": m["message"], "line": line})
    entries = _imbue_prune(entries)
    latest: dict[tuple[tuple[str, str], ...], dict[str, object]] = {}
    for e in entries:
        if e["timestamp"] < cutoff or e["code"] in _IGNORE or e["code"] not in _HANDLE:  # type: ignore[operator]
            continue
        ports = _imbue_event(e)
        if ports is not None and (ports not in latest or e["timestamp"] > latest[ports]["timestamp"]):  # type: ignore[operator]
            latest[ports] = e
    actions = {port: ev for ports, ev in latest.items() for port in ports}
    t1 = time.perf_counter()
    return {"plan_s": round(t1 - t0, 2), "peak_rss_mb": round(_peak_mb()), "disable_ports": len(actions),
            "entries_after_pruning": len(entries)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--run", choices=("ours", "imbue"))
    ap.add_argument("--work", type=Path)
    args = ap.parse_args()
    if args.run:
        print(json.dumps((run_ours if args.run == "ours" else run_imbue)(args.work)))
        return
    with tempfile.TemporaryDirectory(prefix="ports-bench-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        _write_inputs(work, args.lines)
        size = sum(1 for _ in (work / "event.log").open())
        print(f"input: {size:,} event lines, 2 perfquery sweeps of every switch port, written in "
              f"{time.perf_counter() - t0:.1f} s")
        for side in ("ours", "imbue"):
            out = subprocess.run([sys.executable, __file__, "--run", side, "--work", str(work)], check=True,
                                 capture_output=True, text=True).stdout
            print(f"{side:>5}: {out.strip()}")


if __name__ == "__main__":
    main()
