"""The runner against the simulated hosts' ib_write_bw on a running ibsim fabric routed by the real opensm:
hosts that hang, drop the session, exit early or print garbage, and a switch that stops answering perfquery,
make exactly their flows unknown (never pass); every other flow is measured at the fabric's rate, and the
stage ends within its deadline."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from fabric.burnin.actions import gpu_pairing, plan_site
from fabric.burnin.fabric_io import IbTools
from fabric.burnin.history import History
from fabric.burnin.stage_run import RunOptions, run_plan, ssh_remote
from fabric.design import load_design
from fabric.diags import Diags
from provision.site import load_site
from provision.ssh import SshSettings
from provision.state import StateStore
from sim.ibfabric import IbFabric
from sim.ibfabric.diags_prefix import RUN_DIAGS, sim_env
from sim.ibfabric.routing import route
from sim.sshhosts.harness import SshLab
from tests.sites import copy_sim_site

pytestmark = pytest.mark.tools("ibsim", "opensm", "perfquery")

FAULTS = """fixture_root: {replay}
default_fixture: hdr8-healthy
hosts:
  gpu-r1-01: {{perftest: hang}}
  gpu-r1-02: {{perftest: drop}}
  gpu-r1-03: {{perftest: exit_early}}
  gpu-r1-04: {{perftest: garbage}}
  gpu-r2-07: {{endpoint: hang}}
"""


def test_faulty_hosts_and_a_silent_switch_make_their_flows_unknown_and_nothing_else(tmp_path: Path) -> None:
    site_file = copy_sim_site(tmp_path / "sim")
    (tmp_path / "sim" / "fabric-faults.yml").unlink(missing_ok=True)
    faults = tmp_path / "sim" / "perftest-faults.yml"
    faults.write_text(FAULTS.format(replay=Path(__file__).resolve().parents[1] / "fixtures/tools/replay"))
    site = load_site(site_file)
    design = load_design(site.fabric_design)  # type: ignore[arg-type]
    with IbFabric(design, state_file=site.paths.ib_diags) as fabric, \
            SshLab(site_file, faults, tmp_path / "run") as lab:
        route(fabric, "ftree")
        plan = plan_site(site_file, "live", None, "gpu-*", all_hosts=True)
        silent = next(s for s in plan["switches"] if "0c42a10300000080" in s["guid"])  # a spine
        wrapper = tmp_path / "ibsim-run-silent"
        wrapper.write_text(f"#!/bin/sh\ncase \"$*\" in *\"-l {silent['lid']} 255\"*) sleep 30;; esac\n"
                           f"exec {RUN_DIAGS} \"$@\"\n")
        wrapper.chmod(0o755)
        tools = IbTools(Diags(prefix=(str(wrapper),), env=sim_env(fabric.socket)))
        one = {**plan, "stages": plan["stages"][:1]}
        settings = SshSettings.from_site(site, lab.env)
        history = History(StateStore(tmp_path / "s.db"))
        opts = RunOptions(duration_s=1, slack_s=4.0, counter_timeout_s=2.0, cleanup_timeout_s=3.0)
        started = time.monotonic()
        report = asyncio.run(run_plan(one, history, ssh_remote(settings), tools, gpu_pairing(site), opts))
        took = time.monotonic() - started
    rows = history.flows(report.run)
    bad_hosts = {"gpu-r1-01", "gpu-r1-02", "gpu-r1-03", "gpu-r1-04", "gpu-r2-07"}
    by_flow = {f["src_name"] + ">" + f["dst_name"]: f for f in one["stages"][0]}
    for row in rows:
        flow = by_flow[row.src_name + ">" + row.dst_name]
        involved = {flow["src_host"], flow["dst_host"]} & bad_hosts
        through_silent = any(silent["guid"] in link for link in flow["links"])
        if involved or through_silent:
            assert row.status == "unknown" and row.gbps is None, row
            assert (silent["guid"] in row.reason) if through_silent and not involved else row.reason
        else:
            assert row.status == "ok" and row.gbps is not None and 190 < row.gbps < 200, row
    reasons = " ".join(r.reason for r in rows)
    assert "did not finish" in reasons and "exited with 1" in reasons  # hang; exit_early
    assert "no result row" in reasons or "not numbers" in reasons  # garbage
    assert any(r.status == "ok" for r in rows)
    ports = history.ports(report.run)
    assert any(p.counter == "*" and p.guid == silent["guid"] and p.status == "unknown" for p in ports)
    assert took < 1 + 1 + 4 + 5 + 3 + 2 * 2 + 15, took  # duration, grace, slack, connect, cleanup, two sweeps
