"""`provision bisect` over simulated SSH hosts: a simulated all-reduce that fails when a bad host takes part."""

from __future__ import annotations

import json
from typing import Any

import pytest

from provision.bisect.job_runs import REASON, bisect, render_job
from provision.cli import main as provision_main
from provision.health.errors import HealthError
from provision.ssh import SshSettings
from provision.state import State
from tests.health.conftest import needs_replay

JOB = "python3 -m sim.sshhosts.job --hosts {hosts}"


def test_job_templates_get_the_group() -> None:
    assert render_job("mpirun -H {hosts} -np {nnodes} x", ["a", "b"]) == "mpirun -H a,b -np 2 x"
    assert render_job("torchrun --rdzv-endpoint {first}:29500 # {hosts_space}", ["a", "b"]).endswith("a b")
    with pytest.raises(HealthError, match="placeholder"):
        render_job("echo {host}", ["a"])


@needs_replay
def test_two_bad_hosts_of_48_are_found_and_recorded(sim_site_factory: Any) -> None:
    sim = sim_site_factory(48, {"gpu-0007": {"job": "fail"}, "gpu-0031": {"job": "fail"}}, state=State.golden)
    settings = SshSettings.from_site(sim.site, sim.env)
    hosts = [h.hostname for h in sim.site.hosts()]
    report = bisect(hosts, JOB, settings, timeout_s=30, store=sim.store)
    assert report.finding.culprits == ("gpu-0007", "gpu-0031")
    assert report.recorded == ("gpu-0007", "gpu-0031")
    assert report.finding.runs < 30
    for host in ("gpu-0007", "gpu-0031"):
        record = sim.store.get(host)
        assert (record.state, record.reason) == (State.failed, REASON)
        failing = record.evidence["failing_runs_with_this_host"]
        assert any(run["suspects"] == [host] and "NCCL" in run["stderr_tail"] for run in failing)
    assert sim.store.get("gpu-0001").state is State.golden, "cleared hosts are left alone"


@needs_replay
def test_a_job_that_hangs_on_a_host_finds_it_with_imbues_grid(sim_site_factory: Any) -> None:
    sim = sim_site_factory(9, {"gpu-0005": {"job": "hang"}})
    settings = SshSettings.from_site(sim.site, sim.env)
    hosts = [h.hostname for h in sim.site.hosts()]
    report = bisect(hosts, JOB, settings, timeout_s=3, strategy="grid")  # a passing run takes ~0.2 s
    assert report.finding.culprits == ("gpu-0005",)
    assert (report.finding.runs, report.finding.rounds) == (6, 2), "3 rows, then 3 columns"
    assert {r.error for r in report.runs if not r.passed} == {"health_timeout"}, "a hung job is a failed run"


@needs_replay
def test_the_cli_reports_runs_and_rounds(
    sim_site_factory: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = sim_site_factory(16, {"gpu-0005": {"job": "fail"}})
    for name, value in sim.env.items():
        monkeypatch.setenv(name, value)
    code = provision_main(["bisect", "--hosts", "gpu-*", "--cmd", JOB, "--site", str(sim.directory / "site.yml"),
                           "--db", str(sim.store.path), "--json", "--timeout", "30"])
    payload = json.loads(capsys.readouterr().out)
    assert code == 2
    assert payload["culprits"] == ["gpu-0005"]
    assert payload["rounds"] == 3 and payload["job_runs"] == len(payload["runs"])
    assert sim.store.get("gpu-0005").reason == REASON
