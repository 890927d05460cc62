"""The nvidia-smi -q parsers on real captures (H100, H200, A100, GH200, and the lent 2x H200)."""

from __future__ import annotations

import pytest

from tools.health.errors import ParseError
from tools.health.nvsmi import parse_smi_text, parse_smi_xml, same_model

from .conftest import as_older_driver_prints_it, realdata

pytestmark = pytest.mark.realdata

CAPTURES = [
    ("nvidia-smi-q__thamada-gls__H100SXMx8.txt", 8, "NVIDIA H100 80GB HBM3", "565.57.01", "12.7"),
    ("nvidia-smi-q__thamada-gls__A100SXMx4.txt", 4, "NVIDIA A100-SXM4-80GB", "555.42.02", "12.5"),
    ("nvidia-smi-q__thamada-gls__H100NVLx2.txt", 2, "NVIDIA H100 NVL", "550.54.14", "12.4"),
    ("nvidia-smi-q__thamada-gls__H200.txt", 1, "NVIDIA H200", "550.90.12", "12.4"),
    ("nvidia-smi-q__thamada-gls__GH200.txt", 1, "NVIDIA GH200 480GB", "550.127.05", "12.4"),
    ("h200x2-captured-2026-11-29/nvidia-smi-q.txt", 2, "NVIDIA H200", "580.159.04", "13.0"),
]


@pytest.mark.parametrize(("name", "count", "model", "driver", "cuda"), CAPTURES)
def test_text_report_yields_every_gpu(name: str, count: int, model: str, driver: str, cuda: str) -> None:
    report = parse_smi_text(realdata(name))
    assert (report.attached, len(report.gpus), report.driver_version, report.cuda_version) == (
        count, count, driver, cuda)
    for gpu in report.gpus:
        assert gpu.product_name == model
        assert gpu.ecc_current == "Enabled"
        assert gpu.volatile_uncorrected == 0
        assert gpu.clock_events_known and gpu.clock_events_active == ("Idle",)
        assert gpu.uuid and gpu.uuid.startswith("GPU-")


def test_a100_capture_holds_a_real_pending_row_remap_and_corrected_errors() -> None:
    gpus = parse_smi_text(realdata("nvidia-smi-q__thamada-gls__A100SXMx4.txt")).gpus
    pending = [g.bus_id for g in gpus if g.remap_pending]
    assert pending == ["00000000:9E:00.0"]
    assert [g.volatile_corrected for g in gpus if g.bus_id == "00000000:9E:00.0"] == [353]


def test_gh200_single_lane_link_and_fabric_na() -> None:
    (gpu,) = parse_smi_text(realdata("nvidia-smi-q__thamada-gls__GH200.txt")).gpus
    assert (gpu.pcie_gen_max, gpu.pcie_width_current) == (4, 1)
    assert gpu.fabric_state == "N/A"


def test_h100_sxm_fabric_registered() -> None:
    gpus = parse_smi_text(realdata("nvidia-smi-q__thamada-gls__H100SXMx8.txt")).gpus
    assert {(g.fabric_state, g.fabric_status) for g in gpus} == {("Completed", "Success")}


def test_text_and_xml_of_the_same_h200_machine_agree() -> None:
    text = parse_smi_text(realdata("h200x2-captured-2026-11-29/nvidia-smi-q.txt"))
    xml = parse_smi_xml(realdata("h200x2-captured-2026-11-29/nvidia-smi-q-x.xml"))
    assert text == xml


def test_xml_of_a100_including_old_throttle_tags_and_mig() -> None:
    telegraf = parse_smi_xml(realdata("nvidia-smi-q-x__influxdata-telegraf__a100-sxm4-v12.xml"), require_all=False)
    assert telegraf.gpus[0].product_name == "NVIDIA A100-SXM4-80GB" and telegraf.gpus[0].volatile_uncorrected == 0
    mig = parse_smi_xml(realdata("nvidia-smi-q-x__netdata-netdata__a100-sxm4-mig.xml"), require_all=False)
    assert mig.gpus[0].clock_events_known and mig.gpus[0].volatile_uncorrected is None  # N/A under MIG


def test_xml_trimmed_to_fewer_gpus_than_announced_is_refused() -> None:
    with pytest.raises(ParseError, match="announces 4 GPUs but holds 1"):
        parse_smi_xml(realdata("nvidia-smi-q-x__influxdata-telegraf__a100-sxm4-v12.xml"))


@pytest.mark.parametrize("cut", [0.25, 0.5, 0.75, 0.99])
def test_truncated_text_report_is_refused(cut: float) -> None:
    text = realdata("h200x2-captured-2026-11-29/nvidia-smi-q.txt")
    with pytest.raises(ParseError):
        parse_smi_text(text[: int(len(text) * cut)])


def test_default_table_is_not_mistaken_for_the_query_report() -> None:
    with pytest.raises(ParseError, match="Attached GPUs"):
        parse_smi_text(realdata("h200x2-captured-2026-11-29/nvidia-smi.txt"))


def test_older_driver_spelling_of_the_ecc_mode_is_read() -> None:
    older = as_older_driver_prints_it(realdata("nvidia-smi-q__thamada-gls__A100SXMx4.txt"))
    assert "Ecc Mode" in older and "ECC Mode" not in older
    report = parse_smi_text(older)
    assert [g.ecc_current for g in report.gpus] == ["Enabled"] * 4
    assert [g.ecc_pending for g in report.gpus] == ["Enabled"] * 4
    assert {g.product_name for g in report.gpus} == {"A100-SXM4-80GB"}
    assert all(g.clock_events_known for g in report.gpus)


@pytest.mark.parametrize(("site", "driver", "same"), [
    ("NVIDIA H100 80GB HBM3", "H100 80GB HBM3", True),
    ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB", True),
    ("A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", True),
    ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-16GB", True),
    ("NVIDIA Tesla V100-SXM2-16GB", "Tesla V100-SXM2-16GB", True),
    ("nvidia  H200", "NVIDIA H200", True),
    ("NVIDIA A100-SXM4-40GB", "A100-SXM4-80GB", False),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 NVL", False),
    ("NVIDIA H200", "NVIDIA H200 NVL", False),
    ("NVIDIA V100-SXM2-16GB", "Tesla V100-SXM2-16GB", False),
    ("NVIDIA H200", None, False),
])
def test_models_compare_without_the_brand_prefix_only(site: str, driver: str | None, same: bool) -> None:
    assert same_model(site, driver) is same
