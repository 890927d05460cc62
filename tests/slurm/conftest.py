"""A real Slurm (sim/slurm/lab.py: munged, slurmctld, one slurmd per node) for a copy of the embedded site with a
`slurm:` section; the sync is run through the CLI as an operator runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from provision.cli import main
from provision.site import load_site
from provision.site.model import Site
from provision.site.store import open_store
from provision.state import StateStore
from sim.slurm.lab import Partition, SlurmLab, SlurmLabSpec
from tests.sites import copy_sim_site

SLURM_SECTION = """
slurm:
  cluster_name: sim
  controller: ctl-01
  partitions:
    - {name: gpu, classes: [hgx-h200-sim], default: true}
  on_leave: drain
  timeout_s: 4
"""

needs_slurm = pytest.mark.skipif(
    shutil.which("slurmctld") is None or shutil.which("munged") is None or os.geteuid() != 0,
    reason="needs Debian's slurmctld, slurmd and munge (deps/apt/slurm.txt) and root (the lab's daemons run as root)")


def slurm_site(tmp_path: Path, section: str = SLURM_SECTION) -> Site:
    path = copy_sim_site(tmp_path / "site")
    path.write_text(path.read_text() + section)
    return load_site(path)


@dataclass
class SlurmRig:
    site: Site
    lab: SlurmLab
    store: StateStore
    last_err: str = ""

    def sync(self, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
        capsys.readouterr()
        rc = main(["slurm", "sync", "--site", str(self.site.path), "--json", *args])
        captured = capsys.readouterr()
        self.last_err = captured.err
        return rc, json.loads(captured.out) if captured.out.strip() else {}

    def scontrol(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["scontrol", *args], capture_output=True, text=True, check=False, timeout=30,
                              env={**os.environ, **self.lab.env()})

    def node(self, name: str) -> dict[str, object]:
        out = subprocess.run(["sinfo", "--json"], capture_output=True, text=True, check=True, timeout=30,
                             env={**os.environ, **self.lab.env()}).stdout
        return next(n for n in json.loads(out)["nodes"] if n["name"] == name)

    def set_all(self, state: str) -> None:
        for host in self.site.hosts():
            if host.hostname in self.lab.spec.nodes:
                self.store.mark(host.hostname, state, reason="test_setup" if state == "failed" else "test setup")

    def slurm_events(self, host: str) -> list[str]:
        return [e.reason or "" for e in self.store.history(host) if e.command == "slurm sync"]


def gpu_hosts(site: Site) -> tuple[str, ...]:
    return tuple(h.hostname for h in site.hosts() if h.host_class == "hgx-h200-sim")


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SlurmRig]:
    yield from make_rig(tmp_path, monkeypatch)


def make_rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, nodes: tuple[str, ...] | None = None,
             **spec: object) -> Iterator[SlurmRig]:
    site = slurm_site(tmp_path)
    names = nodes if nodes is not None else gpu_hosts(site)
    lab = SlurmLab(tmp_path / "slurm", SlurmLabSpec("sim", names, (Partition("gpu", names, True),), **spec))  # type: ignore[arg-type]
    for key, value in lab.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("BRINGUP_STATE_DB", str(tmp_path / "state.db"))
    store = open_store(site, None)
    store.sync_site((h.hostname, h.rack) for h in site.hosts())
    with lab.running():
        yield SlurmRig(site, lab, store)
    store.close()
