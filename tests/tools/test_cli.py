"""The command line on replay directories: exit codes, JSON, Prometheus textfile, config errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tools.health.__main__ import main
from tools.health.textfile import write_atomically

from .conftest import REPLAY

VARIANTS = [
    ("h200x2-healthy", "expectations-h200x2.json", 0, set()),
    ("h200x2-vbios-drift", "expectations-h200x2.json", 1, set()),
    ("h200x2-xid79", "expectations-h200x2.json", 2, {"xid_79"}),
    ("h200x2-pcie-x4", "expectations-h200x2.json", 2, {"pcie_width_x4"}),
    ("h200x2-ecc-uncorrected", "expectations-h200x2.json", 2, {"ecc_uncorrected"}),
    ("h200x2-ib-healthy", "expectations-h200x2-ib.json", 0, set()),
    ("h200x2-ib-port-down", "expectations-h200x2-ib.json", 2, {"ib_port_down"}),
]


@pytest.mark.parametrize(("variant", "config", "code", "reasons"), VARIANTS)
def test_replay_variant_verdicts(variant: str, config: str, code: int, reasons: set[str],
                                 capsys: pytest.CaptureFixture[str]) -> None:
    level = "fast" if variant == "h200x2-vbios-drift" else "all"  # captured at the fast level only
    rc = main(["--config", str(REPLAY / config), "--replay", str(REPLAY / variant), "--level", level, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == report["exit_code"] == code
    critical = {c["reason"] for c in report["checks"] if c["status"] == "critical"}
    assert critical == reasons
    assert all(c["remediation"] for c in report["checks"] if c["status"] not in ("ok", "not_applicable"))


def test_vbios_drift_on_the_second_lent_host_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--config", str(REPLAY / "expectations-h200x2.json"), "--replay", str(REPLAY / "h200x2-vbios-drift"),
          "--json"])
    (versions,) = [c for c in json.loads(capsys.readouterr().out)["checks"] if c["check"] == "gpu_versions"]
    assert versions["evidence"] == ["00000000:00:07.0 VBIOS 96.00.A5.00.1E, site allows 96.00.A5.00.1A"]


def test_textfile_is_valid_prometheus_exposition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prom = tmp_path / "textfile" / "bringup_health.prom"
    main(["--config", str(REPLAY / "expectations-h200x2.json"), "--replay", str(REPLAY / "h200x2-xid79"),
          "--level", "all", "--textfile", str(prom)])
    capsys.readouterr()
    families = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
    status = {(s.labels["check"], s.labels["status"]): s.value for s in families["bringup_health_check_status"].samples}
    assert status[("gpu_xid", "critical")] == 1 and status[("gpu_xid", "ok")] == 0
    assert [s.value for s in families["bringup_health_exit_code"].samples] == [2]
    measured = {s.labels["name"]: s.value for s in families["bringup_health_measurement"].samples}
    assert measured["allreduce_busbw_gbps_4096mib"] > 340
    assert [p.name for p in prom.parent.iterdir()] == ["bringup_health.prom"]  # no temporary left behind


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "x.prom"
    write_atomically(target, "a 1\n")
    write_atomically(target, "b 2\n")
    assert target.read_text() == "b 2\n" and oct(target.stat().st_mode & 0o777) == "0o644"


def test_bad_config_exits_unknown_and_names_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"gpu": {"count": 2, "model": "NVIDIA H200", "modle": "x"}}))
    assert main(["--config", str(cfg), "--json"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["error"] == "config" and out["problems"][0].startswith("gpu.modle: unknown key")


def test_list_checks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list-checks"]) == 0
    listing = capsys.readouterr().out
    assert "gpu_stress" in listing and "ib_ports" in listing


def test_only_runs_the_named_checks(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--config", str(REPLAY / "expectations-h200x2.json"), "--replay", str(REPLAY / "h200x2-healthy"),
          "--only", "gpu_ecc,swap", "--json"])
    assert [c["check"] for c in json.loads(capsys.readouterr().out)["checks"]] == ["gpu_ecc", "swap"]
