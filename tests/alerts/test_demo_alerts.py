"""The alert rules against the demo's own metrics (`demo_run`: the README's main command, run once per
session): every injected fault of the embedded site fires its alert, and the demo's clean hosts and links
fire none.

What is injected comes from the site's fault files (inventory/sim/*-faults.yml, faults.yml, maas.yml); a
host caught by an earlier stage leaves the flow there, so its later faults are never reached. The metrics
are the textfiles the demo's stages wrote (provision/metrics, fabric/ports/metrics.py), each sample fed
to promtool as the scrape of the controller's node exporter stores it (job bringup, honor_labels: the textfiles'
host labels kept).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.metrics.textfile import metrics_dir
from provision.site.paths import state_dir
from provision.steps.pipeline import ALL_STEPS, BASELINE_STEPS
from sim.site_paths import LAB_DIR_NAME
from tests.alerts.promtool import Series, expectations, read_textfiles, run_promtool, scraped
from tests.demo_run import DemoRun

pytestmark = pytest.mark.tools("promtool")
CONTROLLER = {"job": "bringup", "instance": "127.0.0.1:9100"}
# Stage by stage, what each fault of the fault files makes the bring-up record (sim/redfish, sim/maas,
# tests/fixtures/tools/replay/*: the agent's reasons) and the alert it must raise beside HostFailedStage.
BMC_REASONS = {"wrong_password": "bmc_auth", "http_503": "bmc_error_5xx", "pxe_link_down": "pxe_nic_link_down"}
MAAS_REASONS = {"deploy_fails": "maas_deploy_failed", "commissioning_fails": "maas_commissioning_failed"}
HEALTH_FIXTURES = {"hdr8-xid79": ("xid_79", "GpuHardwareXid"), "hdr8-ecc-uncorrected": ("ecc_uncorrected",
                   "GpuEccUncorrected"), "hdr8-pcie-x4": ("pcie_width_x4", "PcieLinkDegraded")}
LINK_FAULT_ALERTS: dict[str, tuple[str, ...]] = {"width": ("IbLinkDegraded",),
                                                 "lossy": ("IbLinkDegraded", "IbPortErrorsRising")}


def _yaml(site: Path, name: str) -> Any:
    return yaml.safe_load((site.parent / name).read_text(encoding="utf-8")) or {}


Injected = tuple[dict[str, str], dict[str, str], dict[str, tuple[tuple[str, ...], str]]]


def _injected(site: Path) -> Injected:
    """(host -> the reason its first fault records, host -> the alert beside it, injected port -> (the link's
    alerts, the reason the host behind the link records: the port stage disables it, burn-in fails it))."""
    reasons: dict[str, str] = {}
    specific: dict[str, str] = {}
    for host, faults in _yaml(site, "faults.yml")["faults"].items():
        reasons.setdefault(host, BMC_REASONS[faults[0]])
    ethernet = _yaml(site, "ethernet-faults.yml")
    for host in ethernet.get("unplugged", []):  # the switch shows the cable out
        if reasons.get(host) == "pxe_nic_link_down":
            reasons[host] = "pxe_cable_unplugged"
    for host in ethernet.get("err_disabled", []):  # MAAS never boots it; the switch says why
        reasons.setdefault(host, "pxe_port_err_disabled")
    for host, fault in _yaml(site, "maas.yml")["faults"].items():
        reasons.setdefault(host, MAAS_REASONS[fault])
    health = _yaml(site, "health-faults.yml")["hosts"]
    for host, spec in health.items():  # site.yml runs before the health checks
        if "held_wrong_version" in spec.get("os", []):
            reasons.setdefault(host, "site_refuse_to_move_a_package_held_at_another_version")
    for host, spec in health.items():
        if host not in reasons and spec.get("fixture") in HEALTH_FIXTURES:
            reasons[host], specific[host] = HEALTH_FIXTURES[spec["fixture"]]
    lost = (_yaml(site, "training-demo.yml").get("faults") or {}).get("lose_host")
    if lost:  # the training stage's lost host: the supervisor's health re-check cannot reach it
        job = (site.parent / "state" / LAB_DIR_NAME / "training" / "job.txt").read_text(encoding="utf-8").split("\n")
        reasons.setdefault(job[lost["job_host"] - 1].split()[0], "ssh_refused")
    ports: dict[str, tuple[tuple[str, ...], str]] = {}
    ufm = _yaml(site, "ufm-faults.yml")
    for fault, names in (("flap", ("IbPortFlapping",)), ("ber", ("IbPortErrorsRising",))):
        for f in ufm.get(fault, []):
            ports[f"{f['node']}[{f['port']}]"] = (names, "ib_port_disabled")
    for f in _yaml(site, "fabric-faults.yml")["links"]:
        ports[f["port"]] = (LINK_FAULT_ALERTS[f["fault"]], "burnin_link_failed")
    return reasons, specific, ports


def _link_of(samples: list[tuple[str, dict[str, str], float]], port: str) -> dict[str, str]:
    """The port plan's row for the link with this injected port (its name carries both ends)."""
    rows = [lb for name, lb, _v in samples if name == "bringup_ib_link_planned" and port in lb["link"].split(" -- ")]
    assert rows, f"the demo's port plan has no link with the injected port {port}"
    return rows[0]


@pytest.fixture(scope="module")
def demo_metrics(demo_run: DemoRun) -> list[tuple[str, dict[str, str], float]]:
    directory = metrics_dir(state_dir(demo_run.site) / LAB_DIR_NAME / "demo.db", environ={})
    samples = read_textfiles(directory)
    assert samples, f"the demo wrote no metrics in {directory}"
    return samples


def test_every_stage_the_demo_runs_through_the_step_runner_left_its_metrics(demo_metrics: list[
        tuple[str, dict[str, str], float]]) -> None:
    """The demo runs every step of the table through the step runner but `site.yml` (Ansible runs it; the
    playbook records each host with `provision record`) and `power` (not a demo stage); the port plan writes
    its own file."""
    ran = {lb["stage"] for n, lb, _v in demo_metrics if n == "bringup_stage_last_run_timestamp_seconds"}
    # the firmware/BIOS baseline steps (#40) included: the demo's firmware stage catches and fixes two drifted hosts
    assert ran == {s.name for s in ALL_STEPS} - {"site.yml", "power"}
    assert {s.name for s in BASELINE_STEPS} <= ran
    assert {n for n, _lb, _v in demo_metrics} >= {"bringup_host_state", "bringup_host_golden", "bringup_host_failed",
                                                  "bringup_ib_link_planned", "bringup_stage_host_failed"}


def test_every_injected_fault_of_the_demo_fires_its_alert(demo_run: DemoRun, demo_metrics: list[
        tuple[str, dict[str, str], float]], tmp_path: Path) -> None:
    reasons, specific, ports = _injected(demo_run.site)
    firing: dict[str, list[Mapping[str, str]]] = {"HostFailedStage": [], "GpuHardwareXid": [],
                                                   "GpuEccUncorrected": [], "PcieLinkDegraded": []}
    for port, (names, host_reason) in ports.items():
        row = _link_of(demo_metrics, port)
        for name in names:
            firing.setdefault(name, []).append({"link": row["link"], "host": row["host"], "action": row["action"]})
        if row["host"]:  # a host behind a condemned link leaves the flow at that stage
            reasons.setdefault(row["host"], host_reason)
    for host, reason in reasons.items():
        firing["HostFailedStage"].append({"host": host, "reason": reason})
    for host, name in specific.items():
        firing[name].append({"host": host})
    series = scraped(demo_metrics, CONTROLLER, 60)
    result = run_promtool(tmp_path, series, expectations("30m", firing))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_demos_clean_hosts_and_links_raise_no_alert(demo_run: DemoRun, demo_metrics: list[
        tuple[str, dict[str, str], float]], tmp_path: Path) -> None:
    reasons, _specific, ports = _injected(demo_run.site)
    faulted_links = {_link_of(demo_metrics, p)["link"] for p in ports}
    faulted_hosts = set(reasons) | {_link_of(demo_metrics, p)["host"] for p in ports}
    clean = [(n, lb, v) for n, lb, v in demo_metrics
             if lb.get("host") not in faulted_hosts and lb.get("link") not in faulted_links]
    assert any(n == "bringup_host_golden" and v == 1 for n, _lb, v in clean), "the demo made no golden host"
    result = run_promtool(tmp_path, scraped(clean, CONTROLLER, 60), expectations("30m", {}))
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_golden_host_of_the_demo_that_fails_later_raises_host_lost_golden(demo_metrics: list[
        tuple[str, dict[str, str], float]], tmp_path: Path) -> None:
    """The demo's lifecycle for 30 minutes, then its first golden host fails a later check (a nightly health
    run finding Xid 79): HostLostGolden names it from then on for six hours, and never before."""
    golden = sorted(lb["host"] for n, lb, v in demo_metrics if n == "bringup_host_golden" and v == 1)
    assert golden, "the demo made no golden host"
    lost = golden[0]
    rack = next(lb["rack"] for n, lb, _v in demo_metrics if n == "bringup_host_golden" and lb["host"] == lost)
    lifecycle = [(n, lb, v) for n, lb, v in demo_metrics
                 if n.startswith("bringup_host_") and lb.get("host") == lost]
    others = [row for row in demo_metrics if row not in lifecycle]
    series = [*scraped(others, CONTROLLER, 120),
              Series("bringup_host_golden", {"host": lost, "rack": rack, **CONTROLLER}, "1x30 0x90"),
              Series("bringup_host_failed", {"host": lost, "rack": rack, "reason": "xid_79", **CONTROLLER},
                     "_x30 1x90")]
    tests = [*expectations("20m", {"HostLostGolden": []}, silent_others=False),
             *expectations("45m", {"HostLostGolden": [{"host": lost}]}, silent_others=False),
             *expectations("7h", {"HostLostGolden": []}, silent_others=False)]
    result = run_promtool(tmp_path, series, tests)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_textfile_the_demo_wrote_passes_promtool_check_metrics(demo_run: DemoRun) -> None:
    """Prometheus's own linter (`promtool check metrics`: HELP and TYPE for every family, names and suffixes) on
    every textfile the bring-up left: each stage's, the lifecycle snapshot, the port plan's, the training ranks'
    (the supervised run's and the Slurm job's)."""
    lab = state_dir(demo_run.site) / LAB_DIR_NAME
    files = sorted(lab.rglob("*.prom"))
    kinds = {p.name.split("_")[0] + "_" + p.name.split("_")[1].split(".")[0] for p in files}
    assert {"bringup_stage", "bringup_lifecycle", "bringup_ports", "training_rank0"} <= kinds, kinds
    for path in files:
        done = subprocess.run(["promtool", "check", "metrics"], input=path.read_text(), capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, f"{path}: {done.stdout}{done.stderr}"
