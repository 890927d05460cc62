"""Real captured fabrics routed by the real OpenSM in ibsim, saved once under a cache (too big for git).

`routed(name, engine)` returns the fabric as ibsim shows it (`ibnetdiscover`), the forwarding tables the
real `opensm -R <engine>` programmed (`dump_lfts`, 273 MB for Selene) and opensm's own log. The first call
builds them (minutes: ibsim runs the capture's cabling, opensm routes it, dump_lfts reads every switch),
later calls read the cache. The cache is `$BRINGUP_BURNIN_CACHE`, else `~/.cache/bringup/burnin-realdata`;
each entry is keyed by the capture's content hash, so an edited capture is routed again.

Captures come from `../shared/realdata/1_infiniband/` (not copied into the tree: most are under licences the
fixtures do not take); `None` when the capture is absent, so tests skip saying so.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
REALDATA = REPO / ".." / "shared" / "realdata" / "1_infiniband"
CAPTURES = {
    # 3-tier DGX A100 SuperPOD (Selene): 666 switches, 4,341 CAs; GPU hosts are luna-*
    "selene": ("ibnetdiscover__Mellanox-ufm_sdk_3.0__topo_selene.compute.txt", "luna-*"),
    # 2-tier DGX H100 SuperPOD (topograph's example): GPU hosts *-dgx-*
    "dgx-h100": ("ibnetdiscover__NVIDIA-topograph__tests_output_ibnetdiscover_example.out", "*-dgx-*"),
}


@dataclass(frozen=True)
class Routed:
    name: str
    engine: str
    discovered: Path  # ibnetdiscover of the fabric in ibsim
    lfts: Path  # dump_lfts after opensm routed it
    opensm_log: Path
    gpu_hosts: str  # glob of the capture's GPU host names


def cache_dir() -> Path:
    env = os.environ.get("BRINGUP_BURNIN_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "bringup" / "burnin-realdata"


def capture_path(name: str) -> Path | None:
    path = REALDATA / CAPTURES[name][0]
    return path if path.is_file() else None


def _entry(name: str, engine: str, capture: Path) -> Path:
    digest = hashlib.sha256(capture.read_bytes()).hexdigest()[:16]
    return cache_dir() / f"{name}-{digest}" / engine


def cached(name: str, engine: str = "ftree") -> Routed | None:
    """The routed fabric if the capture is here and it was routed before; never builds it."""
    capture = capture_path(name)
    if capture is None:
        return None
    d = _entry(name, engine, capture)
    done = d / "done"
    if not done.is_file():
        return None
    return Routed(name, engine, d / "ibnetdiscover.txt", d / "dump_lfts.txt", d / "opensm.log", CAPTURES[name][1])


def routed(name: str, engine: str = "ftree", timeout_s: float = 1800.0) -> Routed | None:
    """The routed fabric, built now (ibsim + opensm + dump_lfts) unless the cache has it. Builders of one entry
    take turns (a lock file beside it): a second test worker waits for the first and reads what it built."""
    have = cached(name, engine)
    capture = capture_path(name)
    if have is not None or capture is None:
        return have
    entry = _entry(name, engine, capture)
    entry.parent.mkdir(parents=True, exist_ok=True)
    with (entry.parent / f"{engine}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return cached(name, engine) or _build(name, engine, capture, timeout_s)


def _build(name: str, engine: str, capture: Path, timeout_s: float) -> Routed | None:
    from fabric.baseline import design_from_topology
    from fabric.pipeline import topology_from_texts
    from sim.ibfabric import IbFabric
    from sim.ibfabric.routing import dump_lfts, route

    d = _entry(name, engine, capture)
    d.mkdir(parents=True, exist_ok=True)
    design = design_from_topology(topology_from_texts([(name, capture.read_text(errors="replace"))]), name)
    t0 = time.monotonic()
    with IbFabric(design, switch_descriptions="location", timeout_s=timeout_s) as fabric:
        (d / "ibnetdiscover.txt").write_text(fabric.discover())
        t1 = time.monotonic()
        out = route(fabric, engine, timeout_s=timeout_s)
        log = fabric.workdir / "opensm.log"
        (d / "opensm.log").write_text((log.read_text(errors="replace") if log.is_file() else "") or out)
        t2 = time.monotonic()
        (d / "dump_lfts.txt").write_text(dump_lfts(fabric, timeout_s=timeout_s))
        t3 = time.monotonic()
    (d / "done").write_text(f"discover {t1 - t0:.1f} s, opensm -R {engine} {t2 - t1:.1f} s, "
                            f"dump_lfts {t3 - t2:.1f} s\n")
    return cached(name, engine)


if __name__ == "__main__":
    # python -m tests.fabric.burnin.realfabrics selene ftree: build the cache entry ahead of the tests
    got = routed(sys.argv[1] if len(sys.argv) > 1 else "selene", sys.argv[2] if len(sys.argv) > 2 else "ftree")
    print(got if got is not None else "capture absent")
