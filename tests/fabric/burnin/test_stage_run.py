"""The runner without a fabric: a run cut off mid-stage resumes at that stage and redoes nothing finished;
--gpudirect pairs each HCA with its class's GPU; the commands it sends are perftest's."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabric.burnin.actions import gpu_pairing
from fabric.burnin.fabric_io import IbTools
from fabric.burnin.history import History
from fabric.burnin.stage_run import RunOptions, run_plan
from provision.errors import SiteError
from provision.site import load_site
from provision.ssh import RemoteRun
from provision.state import StateStore
from sim.sshhosts.perftest_sim import parse_invocation, report

REPO = Path(__file__).resolve().parents[3]
PERFQUERY = "# Port counters: Lid 7 port 1 (CapMask: 0x1300)\nSymbolErrorCounter:..............{n}\n"


class Tools(IbTools):
    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "sweeps", [0])

    async def run(self, argv: Sequence[str], timeout_s: float) -> str:
        if "-x" in argv:
            return ""
        self.sweeps[0] += 1  # type: ignore[attr-defined]
        return PERFQUERY.format(n=self.sweeps[0])  # type: ignore[attr-defined]


def _flow(src: str, dst: str, n: int) -> dict[str, Any]:
    return {"src": f"0x{n}", "dst": f"0x{n + 100}", "src_name": f"{src}/mlx5_{n}", "dst_name": f"{dst}/mlx5_{n}",
            "src_host": src, "src_hca": f"mlx5_{n}", "src_port": 1, "dst_host": dst, "dst_hca": f"mlx5_{n}",
            "dst_port": 1, "links": [f"s{n}[1]->0c42a10300000070[{n}]"]}


PLAN = {"stages": [[_flow("gpu-r1-01", "gpu-r1-02", 1)], [_flow("gpu-r1-02", "gpu-r1-01", 6)]],
        "switches": [{"guid": "0c42a10300000070", "name": "leaf", "lid": 7}]}


def _remote(calls: list[str], kill_in: str | None = None) -> Any:
    async def remote(host: str, command: str, timeout_s: float) -> RemoteRun:
        calls.append(command)
        if kill_in is not None and kill_in in command:
            await asyncio.sleep(3600)  # this stage never ends: the controller is killed meanwhile
        inv = parse_invocation(command)
        if inv is None:  # the cleanup
            return RemoteRun(host, 0, "", "", 0.0)
        return RemoteRun(host, 0, report(inv, 196.4, 1, 2, inv.duration_s), "", 0.1)
    return remote


def test_a_run_killed_mid_stage_resumes_there_and_gpudirect_names_the_paired_gpu(tmp_path: Path) -> None:
    site = load_site(REPO / "inventory" / "sim" / "site.yml")
    gpu_of = gpu_pairing(site)
    assert [gpu_of("gpu-r1-01", f"mlx5_{i}") for i in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    history = History(StateStore(tmp_path / "s.db"))
    opts = RunOptions(duration_s=1, gpudirect=True, start_grace_s=0.0)
    calls: list[str] = []
    with pytest.raises(TimeoutError):  # the run is cut off mid-stage 2, as a kill would
        asyncio.run(asyncio.wait_for(run_plan(PLAN, history, _remote(calls, kill_in="mlx5_6"), Tools(), gpu_of,
                                              opts), 3.0))
    assert any("--use_cuda=0" in c and "-d mlx5_1" in c for c in calls)
    again: list[str] = []
    done = asyncio.run(run_plan(PLAN, history, _remote(again), Tools(), gpu_of, opts))
    assert done.skipped == (1,) and [s.stage for s in done.stages] == [2]
    assert not any("mlx5_1" in c for c in again) and any("--use_cuda=1" in c and "mlx5_6" in c for c in again)
    assert [(f.stage, f.gbps, f.status) for f in history.flows(done.run)] == [(1, 196.4, "ok"), (2, 196.4, "ok")]
    # every stage read the counters before and after: the port's symbol errors rose by one each time
    assert [(p.stage, p.counter, p.delta) for p in history.ports(done.run)] == [(1, "symbol_errors", 1),
                                                                               (2, "symbol_errors", 1)]
    server = next(c for c in again if "ib_write_bw" in c and "gpu-r1-02" not in c)
    assert server.startswith("timeout -k 5 ") and "--report_gbits -D 1" in server


def test_gpudirect_follows_the_host_class_pairing_when_it_states_one(tmp_path: Path) -> None:
    text = (REPO / "inventory" / "sim" / "site.yml").read_text()
    doc = yaml.safe_load(text)
    cls = next(c for c in doc["host_classes"].values() if (c.get("ib") or {}).get("hca_count") == 8)
    cls["ib"]["gpu_for_hca"] = [1, 1, 1, 1, 0, 0, 0, 0]
    site_dir = tmp_path / "site"
    shutil.copytree(REPO / "inventory" / "sim", site_dir, ignore=shutil.ignore_patterns("state"))
    (site_dir / "site.yml").write_text(yaml.safe_dump(doc))
    gpu_of = gpu_pairing(load_site(site_dir / "site.yml"))
    assert [gpu_of("gpu-r1-01", f"mlx5_{i}") for i in range(8)] == [1, 1, 1, 1, 0, 0, 0, 0]
    cls["ib"]["gpu_for_hca"] = [0, 1]
    (site_dir / "site.yml").write_text(yaml.safe_dump(doc))
    with pytest.raises(SiteError, match="gpu_for_hca"):
        load_site(site_dir / "site.yml")
    cls["ib"]["gpu_for_hca"] = [0, 1, 2, 3, 4, 5, 6, 7]
    (site_dir / "site.yml").write_text(yaml.safe_dump(doc))
    with pytest.raises(SiteError, match="gpu_for_hca"):
        load_site(site_dir / "site.yml")
