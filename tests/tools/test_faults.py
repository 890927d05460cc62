"""Bad input and faults: empty, truncated, garbled and foreign-locale output of every probe, a probe whose tool
is missing, a probe that hangs. Every check that reads the probe must say "unknown" with a reason; none may
crash or say "ok"."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from tools.health import agent, catalog
from tools.health.config import Expectations
from tools.health.outcome import NOT_APPLICABLE, OK, UNKNOWN
from tools.health.probe_run import ReplayRunner

from .conftest import REPLAY, expectations
from .test_system_storage import ZPOOL_OK

DOCKER_LISTING = ("GPU 0: NVIDIA H200 (UUID: GPU-7b66e46d-ebaf-2948-8250-6dba0a140392)\n"
                  "GPU 1: NVIDIA H200 (UUID: GPU-c8045656-c1db-d6d0-8d7b-a4b8a670341e)\n")

# What a tool prints when the host runs it in another language (or a tool of another kind answers).
FOREIGN = {
    "nvidia-smi-q": "==============NVSMI LOG==============\n\nTreiberversion : 580.159.04\nAngeschlossene GPUs : 2\n",
    "nvidia-smi-nvlink-s": "GPU 0: NVIDIA H200 (UUID: GPU-7b66e46d)\n\t Verbindung 0: 26,562 GB/s\n",
    "nvidia-smi-topo-m": "\tGPU0\tGPU1\tCPU-Affinität\nGPU0\t X \tNV18\t0-31\nGPU1\tNV18\t X \t0-31\n\nLegende:\n",
    "nvidia-smi-nvlink-e": "GPU 0: NVIDIA H200 (UUID: GPU-7b66e46d)\n\t Verbindung 0: Wiederholungsfehler: 0\n",
    "dmesg": "[So Nov 29 22:13:05 2026] nvidia: Laden des Moduls\n[So Nov 29 22:13:06 2026] NVRM: GPU bereit\n",
    "systemctl-fabricmanager": "aktiv\n",
    "df": "Dateisystem 1-Blöcke Benutzt Verfügbar Kapazität Eingehängt auf\n/dev/vda 1000 10 990 1% /\n",
    "zpool-status": "  Pool: data\n Zustand: ONLINE\nFehler: Keine bekannten Datenfehler\n",
    "docker-gpus": "Keine GPU gefunden.\n",
}
# In-process readers of /sys and /proc and the JSON of our own GPU worker have no locale.
NO_LOCALE = {"pcie-links", "ib-sysfs", "proc-modules", "proc-swaps", "cpu-governor", "adjtimex",
             "long-stress", "long-membw", "long-allreduce"}


def _full_expectations() -> Expectations:
    """Every check applies: NVSwitch, GPUDirect, docker, ZFS, governor, clock, IB, long floors."""
    return expectations("expectations-h200x2-ib.json",
                        gpu={"nvswitch": True, "peermem_required": True},
                        system={"docker_image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                                "cpu_governor": "performance", "clock_sync_required": True},
                        storage={"zpools": ["data"]})


def _baseline(tmp_path: Path) -> Path:
    d = tmp_path / "host"
    shutil.copytree(REPLAY / "h200x2-ib-healthy", d)
    (d / "systemctl-fabricmanager.out").write_text("active\n", encoding="utf-8")
    (d / "docker-gpus.out").write_text(DOCKER_LISTING, encoding="utf-8")
    (d / "zpool-status.out").write_text(ZPOOL_OK, encoding="utf-8")
    return d


def _readers(probe: str, exp: Expectations) -> list[str]:
    return [c.name for c in catalog.CHECKS if probe in c.probes and c.not_applicable(exp) is None]


def _truncate(text: str) -> str:
    cut = len(text) // 2
    while cut > 1 and text[cut - 1] == "\n":
        cut -= 1
    return text[:cut]


def _garble(probe: str) -> str:
    rng = random.Random(probe)
    return rng.randbytes(3000).decode("latin-1").replace("\r", "") + "\n"


PROBES = sorted(p.name for p in catalog.probes(_full_expectations()).values() if p.name != "journalctl-k")
FAULTS = ["empty", "truncated", "garbled", "foreign", "missing", "hang"]


def test_baseline_reads_every_probe_without_unknowns(tmp_path: Path) -> None:
    exp = _full_expectations()
    report = agent.run(exp, ReplayRunner(_baseline(tmp_path)), "all")
    unknowns = [(o.check, o.summary) for o in report.outcomes if o.status == UNKNOWN]
    assert unknowns == []
    # The faults below must move these checks; a check already unknown would prove nothing.
    assert {o.status for o in report.outcomes} - {OK, NOT_APPLICABLE} <= {"warn"}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("probe", PROBES)
def test_fault_makes_every_reader_unknown(tmp_path: Path, probe: str, fault: str) -> None:
    if fault == "foreign" and probe in NO_LOCALE:
        pytest.skip(f"{probe} is read in-process or is our worker's JSON: no locale applies")
    exp = _full_expectations()
    d = _baseline(tmp_path)
    out = d / f"{probe}.out"
    rc = d / f"{probe}.rc"
    original = out.read_text(encoding="utf-8")
    rc.unlink(missing_ok=True)
    if fault == "empty":
        out.write_text("", encoding="utf-8")
    elif fault == "truncated":
        out.write_text(_truncate(original), encoding="utf-8")
    elif fault == "garbled":
        out.write_text(_garble(probe), encoding="utf-8")
    elif fault == "foreign":
        out.write_text(FOREIGN[probe], encoding="utf-8")
    elif fault == "missing":
        out.unlink()
    else:
        rc.write_text("timeout\n", encoding="utf-8")
    report = agent.run(exp, ReplayRunner(d), "all")
    by_name = {o.check: o for o in report.outcomes}
    readers = _readers(probe, exp)
    assert readers, f"no check reads {probe}"
    for name in readers:
        outcome = by_name[name]
        assert outcome.status == UNKNOWN, (name, outcome)
        assert outcome.summary and outcome.reason
    assert report.exit_code in (2, 3)
