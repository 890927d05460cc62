"""The firmware baseline's exact HCA and GPU versions reach the health agent (ib.firmware, gpu.vbios_versions) and
the roles (bringup_versions.hca_firmware, the hca_firmware role's default) where the class's `versions` pins none;
an explicit `versions` pin wins, and a pin with an id glob or a minimum is no agent expectation."""

from __future__ import annotations

from typing import Any

from provision.health.agent_expectations import render_agent_expectations
from provision.health.expectations import host_class_facts
from provision.site.firmware import baseline_versions
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
