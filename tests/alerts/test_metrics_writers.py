"""The metrics every stage writes: the textfile format, the runner's per-stage hook, the port plan's
causes, and the scrape targets generated from the state store."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from fabric.ports.evidence import Evidence
from fabric.ports.metrics import causes
from fabric.topology import End
from provision.cli import main
from provision.metrics.stages import LIFECYCLE_FILE
from provision.metrics.targets import Ports, scrape_targets, target_hosts, write_targets
from provision.metrics.textfile import ENV_METRICS_DIR, Family, Sample, metrics_dir, render, write_families
from provision.state import State, StateStore
from provision.steps.runner import RunLimits, run_step
from tests.alerts.promtool import parse
from tests.sites import copy_sim_site
from tests.steps.test_runner import ProbeStep, _host, _store


def test_rendered_families_parse_back_with_awkward_label_values_intact() -> None:
    text = render([Family("bringup_x", 'help with "quotes"', (Sample({"host": 'a"b\\c\nd', "z": "1"}, 2.5),
                                                                Sample({}, float("nan"))))])
    rows = parse(text)
    assert rows[0] == ("bringup_x", {"host": 'a"b\\c\nd', "z": "1"}, 2.5)
    assert rows[1][0] == "bringup_x" and rows[1][2] != rows[1][2]  # NaN


def test_bad_metric_label_and_file_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Family("bringup-x", "h")
    with pytest.raises(ValueError):
        Family("bringup_x", "h", (Sample({"__name__": "y"}, 1),))
    with pytest.raises(ValueError):
        write_families(tmp_path, "../escape.prom", [])


def test_metrics_go_beside_the_state_database_unless_the_environment_names_a_directory(tmp_path: Path) -> None:
    assert metrics_dir(tmp_path / "s.db", environ={}) == tmp_path / "metrics"
    assert metrics_dir(tmp_path / "s.db", environ={ENV_METRICS_DIR: "/var/lib/x"}) == Path("/var/lib/x")


def test_every_run_of_a_step_writes_its_stage_file_and_the_lifecycle_snapshot(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_METRICS_DIR, raising=False)
    names = ["ok-1", "fail-1", "ok-2"]
    store = _store(tmp_path, names)
    asyncio.run(run_step(ProbeStep(store), store, [_host(n) for n in names], RunLimits(4, 5.0)))
    stage = parse((tmp_path / "metrics" / "bringup_stage_probe.prom").read_text())
    assert {(lb["outcome"], v) for n, lb, v in stage if n == "bringup_stage_hosts"} == {
        ("ok", 2), ("failed", 1), ("skipped", 0)}
    assert [lb for n, lb, _v in stage if n == "bringup_stage_host_failed"] == [
        {"stage": "probe", "host": "fail-1", "reason": "probe_refused"}]
    life = parse((tmp_path / "metrics" / LIFECYCLE_FILE).read_text())
    assert {(lb["host"], lb["state"]) for n, lb, _v in life if n == "bringup_host_state"} == {
        ("ok-1", "bmc_reachable"), ("ok-2", "bmc_reachable"), ("fail-1", "failed")}
    assert {(lb["host"], v) for n, lb, v in life if n == "bringup_host_golden"} == {
        ("ok-1", 0), ("ok-2", 0), ("fail-1", 0)}
    # A re-run acts on nobody (all skipped) and still says so.
    asyncio.run(run_step(ProbeStep(store), store, [_host("ok-1")], RunLimits(4, 5.0)))
    stage = parse((tmp_path / "metrics" / "bringup_stage_probe.prom").read_text())
    assert {(lb["outcome"], v) for n, lb, v in stage if n == "bringup_stage_hosts"} == {
        ("ok", 0), ("failed", 0), ("skipped", 1)}


def test_a_metrics_directory_that_cannot_be_written_never_fails_the_step(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv(ENV_METRICS_DIR, str(blocker))
    store = _store(tmp_path, ["ok-1"])
    results = asyncio.run(run_step(ProbeStep(store), store, [_host("ok-1")], RunLimits(4, 5.0)))
    assert results[0].ok and store.get("ok-1").state is State.bmc_reachable


def _ev(kind: str, code: int | None = None, text: str = "") -> Evidence:
    return Evidence(None, "test", kind, End("0a", 1), text, code)


def test_port_plan_causes_tell_flapping_from_errors_from_one_link_down() -> None:
    assert causes([_ev("event", 702, "Peer Port h mlx5_1:1 is considered by SM as unhealthy due to FLAPPING.")]) == [
        "flapping"]
    assert causes([_ev("event", 329), _ev("event", 329)]) == ["flapping"]
    assert causes([_ev("event", 329)]) == ["down"]  # a link the plan disabled goes down once by its own doing
    assert causes([_ev("event", 110), _ev("event", 702, "unhealthy due to HIGH_BER")]) == ["errors"]
    assert causes([_ev("degraded"), _ev("counter")]) == ["degraded", "errors"]
    assert causes([_ev("event", 64)]) == ["other"]


def test_scrape_targets_follow_each_hosts_state_and_address(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db", actor="test")
    names = ["gpu-1", "gpu-2", "gpu-3", "gpu-4", "ctl-1"]
    store.sync_site((n, "r1") for n in names)
    for n, addr in (("gpu-1", "10.0.0.1"), ("gpu-2", "10.0.0.2"), ("gpu-3", "fd00::3"), ("ctl-1", "10.0.0.9")):
        store.set_facts(n, command="test", os_address=addr)
    for n, path in (("gpu-1", FLOW_TO_GOLDEN), ("gpu-2", FLOW_TO_GOLDEN[:6]), ("gpu-3", FLOW_TO_GOLDEN[:8])):
        for state in path:
            store.mark(n, state, reason="test")
    store.mark("gpu-3", State.failed, reason="test")  # failed after configured: DCGM still runs there
    hosts = target_hosts(store, [(n, "r1", "controller" if n.startswith("ctl") else "gpu") for n in names])
    groups = scrape_targets(hosts, Ports(9100, 9400))
    assert [g["targets"] for g in groups["node"]] == [["10.0.0.1:9100"], ["10.0.0.2:9100"], ["[fd00::3]:9100"]]
    assert [g["labels"]["host"] for g in groups["dcgm"]] == ["gpu-1", "gpu-3"]
    assert groups["training"] == [{"targets": ["10.0.0.1:9100"], "labels": {"host": "gpu-1", "rack": "r1",
                                                                            "role": "gpu"}}]
    assert write_targets(tmp_path / "sd", groups) == {"node": True, "dcgm": True, "training": True}
    assert write_targets(tmp_path / "sd", groups) == {"node": False, "dcgm": False, "training": False}
    assert json.loads((tmp_path / "sd" / "dcgm.json").read_text())[1]["targets"] == ["[fd00::3]:9400"]


FLOW_TO_GOLDEN = [State.bmc_reachable, State.macs_harvested, State.pxe_armed, State.enlisted, State.commissioned,
                  State.deployed, State.configured, State.healthy, State.burned_in, State.golden]


def test_provision_metrics_targets_writes_the_file_sd_files_and_the_lifecycle_snapshot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(ENV_METRICS_DIR, raising=False)
    monkeypatch.delenv("BRINGUP_STATE_DB", raising=False)
    site = copy_sim_site(tmp_path / "sim")
    assert main(["status", "--site", str(site)]) == 0  # creates the store with the site's hosts
    db = site.parent / "state" / "sim.db"
    store = StateStore(db, actor="test")
    store.set_facts("gpu-r1-01", command="test", os_address="10.64.16.2")
    store.close()
    capsys.readouterr()
    out = tmp_path / "sd"
    assert main(["metrics", "targets", "--site", str(site), "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["jobs"]["node"] == {"targets": 1, "changed": True}
    assert "gpu-r1-02" in report["without_address"]
    assert json.loads((out / "node.json").read_text())[0]["targets"] == ["10.64.16.2:9100"]
    assert json.loads((out / "dcgm.json").read_text()) == []  # declared, never configured
    life = parse((db.parent / "metrics" / LIFECYCLE_FILE).read_text())
    assert ("bringup_host_state", {"host": "gpu-r1-01", "rack": "r1", "state": "declared"}, 1.0) in life
