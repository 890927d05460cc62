"""The firmware baseline's exact HCA and GPU versions reach the health agent (ib.firmware, gpu.vbios_versions) and
the roles (bringup_versions.hca_firmware, the hca_firmware role's default) where the class's `versions` pins none;
an explicit `versions` pin wins, and a pin with an id glob or a minimum is no agent expectation. The HCA pin's
image reaches roles/hca_firmware through the inventory's bringup_firmware_images."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from provision.health.agent_expectations import render_agent_expectations
from provision.health.expectations import host_class_facts
from provision.site.firmware import baseline_images, baseline_versions
from provision.site.model import HostClass


def cls(firmware: dict[str, Any], versions: dict[str, Any] | None = None) -> HostClass:
    return HostClass.model_validate({"gpu": {"model": "NVIDIA H200", "count": 2},
                                     "ib": {"hca_count": 2, "link_speed": "NDR"}, "versions": versions or {},
                                     "firmware": firmware})


def test_exact_whole_kind_pins_become_the_agents_hca_firmware_and_vbios() -> None:
    pins = {"components": [{"kind": "hca", "version": "28.43.1014"}, {"kind": "gpu", "version": "96.00.A5.00.1A"},
                           {"kind": "bios", "version": "2.3.5"}]}
    facts = host_class_facts(cls(pins))
    assert facts["versions"] == {"gpu_driver_source": "cuda", "hca_firmware": "28.43.1014", "vbios": "96.00.A5.00.1A"}
    agent = render_agent_expectations(facts, hostname="h00")
    assert agent["ib"]["firmware"] == ["28.43.1014"] and agent["gpu"]["vbios_versions"] == ["96.00.A5.00.1A"]


def test_versions_win_and_globs_or_minimums_are_no_expectation() -> None:
    explicit = cls({"components": [{"kind": "hca", "version": "28.43.1014"}]}, {"hca_firmware": "28.39.1002"})
    assert explicit.version_facts()["hca_firmware"] == "28.39.1002"
    loose = {"components": [{"kind": "hca", "min_version": "28.43.1014"},
                            {"kind": "gpu", "id": "HGX_FW_GPU_*", "version": "97.10.3E.00.05"}]}
    assert baseline_versions(cls(loose).firmware) == {}
    assert baseline_versions(None) == {}


def test_the_baseline_hca_image_reaches_the_role_resolved_beside_the_site(tmp_path: Path) -> None:
    sha = "ab" * 32
    whole = {"components": [{"kind": "hca", "version": "28.43.1014", "image": {"file": "images/fw.bin", "sha256": sha}},
                            {"kind": "gpu", "version": "96.00.A5.00.1A"}]}
    assert baseline_images(cls(whole).firmware, tmp_path) == {
        "hca_firmware": {"image": str((tmp_path / "images" / "fw.bin").resolve()), "sha256": sha}}
    globbed = {"components": [{"kind": "hca", "id": "InfiniBand.Slot.*", "version": "28.43.1014",
                               "image": {"file": "fw.bin", "sha256": sha}}]}
    assert baseline_images(cls(globbed).firmware, tmp_path) == {}  # some HCAs only: not the role's to burn
    assert baseline_images(None, tmp_path) == {}
    defaults = (Path(__file__).resolve().parents[2] / "roles/hca_firmware/defaults/main.yml").read_text()
    assert "bringup_firmware_images" in defaults  # the role's default reads what the inventory exports
