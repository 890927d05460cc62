"""Each alert rule fed by the exporters and writers it reads, and silent on their healthy output.

Stand-ins and their sources: DCGM fields as dcgm-exporter names them (NVIDIA/dcgm-exporter,
etc/default-counters.csv: DCGM_FI_DEV_XID_ERRORS "value of the last XID error", DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,
DCGM_FI_DEV_CLOCKS_EVENT_REASONS, NVML's clocks-event bitmask); the node exporter's infiniband collector
(prometheus/node_exporter collector/infiniband_linux.go: node_infiniband_link_downed_total,
node_infiniband_symbol_error_total, labels device and port). The health agent's textfile, the training
monitor's, the MFU diagnosis's and the nightly burn-in's are rendered by their real writers
(tools/health/textfile.py, training/monitor.py, training/diagnosis/report.py, fabric/burnin/nightly.py).
Host targets carry the `host` label the generated scrape targets give them (provision/metrics/targets.py).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from fabric.burnin.history import LinkRow
from fabric.burnin.nightly import flags, prometheus
from provision.metrics.stages import lifecycle_families, stage_families
from provision.metrics.textfile import render as render_families
from provision.state import StateStore
from provision.state.lifecycle import FLOW
from provision.steps.runner import HostResult
from tests.alerts.promtool import Series, expectations, parse, run_promtool, scraped
from tools.health.outcome import Outcome
from tools.health.textfile import render
from training.diagnosis.classify import Anomaly
from training.diagnosis.report import AnomalySink
from training.monitor import MetricsWriter, StepRecord

pytestmark = pytest.mark.tools("promtool")
A, B = "gpu-r1-01", "gpu-r1-02"


def _dcgm(host: str, name: str, values: str, gpu: str = "0") -> Series:
    return Series(name, {"host": host, "job": "dcgm", "instance": f"{host}:9400", "gpu": gpu,
                         "UUID": f"GPU-{host}-{gpu}", "modelName": "NVIDIA H200"}, values)


def _ib(host: str, name: str, values: str, device: str = "mlx5_0") -> Series:
    return Series(name, {"host": host, "job": "node", "instance": f"{host}:9100", "device": device, "port": "1"},
                  values)


def test_dcgm_hardware_xid_fires_and_application_xids_do_not(tmp_path: Path) -> None:
    series = [_dcgm(A, "DCGM_FI_DEV_XID_ERRORS", "79x30"), _dcgm(B, "DCGM_FI_DEV_XID_ERRORS", "13x30"),
              _dcgm(B, "DCGM_FI_DEV_XID_ERRORS", "31x30", gpu="1"), _dcgm("gpu-r1-03", "DCGM_FI_DEV_XID_ERRORS", "0x30")]
    r = run_promtool(tmp_path, series, expectations("10m", {"GpuHardwareXid": [{"host": A}]}))
    assert r.returncode == 0, r.stdout + r.stderr


def test_dcgm_uncorrected_ecc_fires_on_the_host_with_double_bit_errors(tmp_path: Path) -> None:
    series = [_dcgm(A, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "0 0 2x30"), _dcgm(B, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "0x30")]
    r = run_promtool(tmp_path, series, expectations("10m", {"GpuEccUncorrected": [{"host": A}]}))
    assert r.returncode == 0, r.stdout + r.stderr


def test_clock_throttling_fires_after_five_minutes_of_thermal_slowdown_not_for_power_cap_or_idle(
        tmp_path: Path) -> None:
    series = [_dcgm(A, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "64x30"),  # 0x40 HW thermal slowdown
              _dcgm(B, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "4x30"),  # 0x4 SW power cap: expected under load
              _dcgm(B, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "1x30", gpu="1"),  # idle, pre-3.3 field name
              _dcgm("gpu-r1-03", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "136x30")]  # 0x80 power brake + 0x8
    tests = [*expectations("3m", {}), *expectations(
        "10m", {"GpuClockThrottled": [{"host": A}, {"host": "gpu-r1-03"}]})]
    r = run_promtool(tmp_path, series, tests)
    assert r.returncode == 0, r.stdout + r.stderr


def test_ib_port_whose_link_goes_down_repeatedly_flaps_and_a_steady_port_does_not(tmp_path: Path) -> None:
    series = [_ib(A, "node_infiniband_link_downed_total", "0 0 1 1 1 2 2 3x30"),
              _ib(A, "node_infiniband_link_downed_total", "4x40", device="mlx5_1"),  # old downs, none new
              _ib(B, "node_infiniband_link_downed_total", "0 0 1x40")]  # went down once: not flapping
    r = run_promtool(tmp_path, series, expectations("20m", {"IbPortFlapping": [
        {"host": A, "device": "mlx5_0", "port": "1"}]}))
    assert r.returncode == 0, r.stdout + r.stderr


def test_ib_port_with_rising_symbol_errors_fires_after_fifteen_minutes(tmp_path: Path) -> None:
    series = [_ib(A, "node_infiniband_symbol_error_total", "0+40x60"),
              _ib(B, "node_infiniband_symbol_error_total", "1200x60"),  # counted long ago, not rising
              _ib(B, "node_infiniband_port_receive_errors_total", "7x60")]
    tests = [*expectations("10m", {}), *expectations("30m", {"IbPortErrorsRising": [
        {"host": A, "device": "mlx5_0", "port": "1"}]})]
    r = run_promtool(tmp_path, series, tests)
    assert r.returncode == 0, r.stdout + r.stderr


def _agent(host: str, *outcomes: Outcome) -> list[Series]:
    text = render(outcomes, "fast", host, 1_796_000_000.0, 0.2)
    return scraped(parse(text), {"host": host, "job": "node", "instance": f"{host}:9100"}, 30)


def test_the_health_agents_own_textfile_raises_xid_ecc_throttle_and_pcie_alerts(tmp_path: Path) -> None:
    ok = [Outcome(c, "ok", "fine") for c in ("gpu_xid", "gpu_ecc", "gpu_clock_events", "pcie_links")]
    series = [
        *_agent(A, Outcome("gpu_xid", "critical", "Xid 79", reason="xid_79"),
                Outcome("gpu_ecc", "critical", "uncorrected", reason="ecc_uncorrected",
                        metrics=(("uncorrected_00000000:00:06.0", 2.0),)),
                Outcome("gpu_clock_events", "warn", "HW slowdown", reason="clock_slowdown"),
                Outcome("pcie_links", "critical", "x4", reason="pcie_width_x4")),
        *_agent(B, *ok, Outcome("gpu_ecc_more", "ok", "0 corrected", metrics=(("ecc_corrected_volatile", 3.0),))),
    ]
    firing = {name: [{"host": A}] for name in ("GpuHardwareXid", "GpuEccUncorrected", "GpuClockThrottled",
                                                "PcieLinkDegraded")}
    r = run_promtool(tmp_path, series, expectations("10m", firing))
    assert r.returncode == 0, r.stdout + r.stderr


def _training(tmp: Path, steps: list[int]) -> list[Series]:
    """training_step as the monitor writes it, one rewrite per minute, scraped with the job's own labels."""
    writer = MetricsWriter(tmp / "run", 0, "llama-8b", tmp / "prom")
    values: dict[tuple[str, tuple[tuple[str, str], ...]], list[str]] = {}
    for step in steps:
        writer.step(StepRecord(step, 2.5, 1.0, 3e-4, 1.2, 8192, 9000.0, 0.45, 60.0, 70.0, False, host=A), 0)
        for name, labels, value in parse(writer.prom_path.read_text(encoding="utf-8")):
            if name == "training_step":
                values.setdefault((name, tuple(sorted(labels.items()))), []).append(f"{value:g}")
    writer.close()
    return [Series(n, {**dict(lb), "instance": f"{A}:9100"}, " ".join(v)) for (n, lb), v in values.items()]


def test_a_training_job_that_stops_stepping_fires_no_progress_and_a_stepping_one_does_not(tmp_path: Path) -> None:
    stalled = _training(tmp_path / "a", [10 * i for i in range(10)] + [90] * 30)
    moving = [Series("training_step", {"job": "llama-70b", "rank": "0", "instance": f"{B}:9100"}, "0+10x40")]
    tests = [*expectations("15m", {}), *expectations("35m", {"TrainingNoProgress": [{"job": "llama-8b"}]})]
    r = run_promtool(tmp_path, [*stalled, *moving], tests)
    assert r.returncode == 0, r.stdout + r.stderr


def test_training_anomaly_fires_per_kind_and_host_and_not_for_labels(tmp_path: Path) -> None:
    """The diagnosis's own sink writes the textfile (training/diagnosis/report.py); a label (a checkpoint's
    periodic dip) is not exported, so it cannot alert."""
    (tmp_path / "run").mkdir()
    sink = AnomalySink(tmp_path / "run", "llama-8b", tmp_path / "prom")
    sink.emit([Anomaly("straggler", True, (A,), (40, 60), 0.6, {"rank": 3}),
               Anomaly("checkpoint", False, (), (100,), 0.1, {})])
    series = [*_training(tmp_path / "steps", list(range(0, 300, 10))),
              *scraped(parse(sink.prom.read_text(encoding="utf-8")), {"instance": f"{A}:9100"}, 30)]
    r = run_promtool(tmp_path, series, expectations("10m", {"TrainingAnomaly": [{"kind": "straggler", "host": A}]}))
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_link_the_nightly_burn_in_flags_fires_and_its_clean_links_do_not(tmp_path: Path) -> None:
    def row(run: int, link: str, gbps: float, errors: int) -> LinkRow:
        return LinkRow(run, f"2026-11-{run:02d}", link, f"name-{link}", "pass", gbps, errors, "", 0.0)
    history = {"L1": [row(1, "L1", 395.0, 0), row(2, "L1", 396.0, 0), row(3, "L1", 394.0, 0)],
               "L2": [row(1, "L2", 395.0, 0), row(2, "L2", 395.5, 0), row(3, "L2", 300.0, 12)]}
    tonight = [history["L1"][-1], history["L2"][-1]]
    text = prometheus(history, flags(tonight, history), date(2026, 11, 3))
    series = scraped(parse(text), {"job": "node", "instance": "ctl-01:9100"}, 30)
    r = run_promtool(tmp_path, series, expectations("5m", {"IbLinkBurnInFlagged": [
        {"link": "L2", "name": "name-L2"}]}))
    assert r.returncode == 0, r.stdout + r.stderr


def test_an_exporter_down_for_ten_minutes_fires(tmp_path: Path) -> None:
    series = [Series("up", {"job": "dcgm", "host": A, "instance": f"{A}:9400"}, "1 1 0x30"),
              Series("up", {"job": "node", "host": A, "instance": f"{A}:9100"}, "1x30")]
    r = run_promtool(tmp_path, series, expectations("20m", {"ExporterDown": [
        {"job": "dcgm", "host": A, "instance": f"{A}:9400"}]}))
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_clean_site_all_golden_after_clean_stage_runs_raises_nothing(tmp_path: Path) -> None:
    """The state store's writers on a site where every host went through and every stage passed."""
    store = StateStore(tmp_path / "s.db", actor="test")
    hosts = [f"gpu-r1-{i:02d}" for i in range(1, 9)]
    store.sync_site((h, "r1") for h in hosts)
    for h in hosts:
        for state in FLOW[1:]:
            store.mark(h, state, reason="test")
    results = [HostResult(h, True) for h in hosts]
    text = render_families([*stage_families("health", results, 1_796_000_000.0, 2.0),
                            *lifecycle_families(store.hosts(), 1_796_000_000.0)])
    series = scraped(parse(text), {"job": "bringup", "instance": "127.0.0.1:9100"}, 60)
    series += [_dcgm(h, "DCGM_FI_DEV_XID_ERRORS", "0x60") for h in hosts]
    series += [_dcgm(h, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "4x60") for h in hosts]  # power cap under load
    series += [_ib(h, "node_infiniband_symbol_error_total", "3x60") for h in hosts]
    series += [Series("up", {"job": "node", "host": h, "instance": f"{h}:9100"}, "1x60") for h in hosts]
    r = run_promtool(tmp_path, series, [*expectations("30m", {}), *expectations("59m", {})])
    assert r.returncode == 0, r.stdout + r.stderr
