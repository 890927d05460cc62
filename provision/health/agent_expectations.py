"""The health agent's expectations (the JSON `tools/health/config.py` reads), rendered from plain host-class facts.

One renderer serves both producers: the controller (`provision health`, which converts the site's host class
with `provision.health.expectations.host_class_facts`) and the `health_agent` role (its
`bringup_health_expectations` filter, over the host variables the Ansible inventory exports). The facts are
plain data in the inventory's shape:

    hardware: {gpu: {model, count} | null, ib: {hca_count, link_speed, link_width} | null,
               pcie: {gpu_gen, gpu_width, hca_gen, hca_width} | null, nvme_data_disks, nvswitch}
    versions: {gpu_driver, cuda, vbios, hca_firmware, ...}   (a version absent or null is not pinned)
    floors:   {matmul_tflops, allreduce_busbw_gbps, disk_usage_max_pct}
              (matmul_tflops is the sustained rate every GPU must hold: the agent's long.stress_tflops_floor)

Facts are read strictly: a key they lack is an error that names it, never a silent default, so a key renamed
by one producer fails at once instead of dropping an expectation. Nothing here imports the site model: the
role's filter plugin imports this module from inside ansible-playbook.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The `schema_version` tools/health/config.py reads (its SCHEMA_VERSION; a test keeps the two equal).
SCHEMA_VERSION = 1

LEVELS = ("fast", "long", "all")
_LEVELS_WITH_LONG_CHECKS = ("long", "all")

# Data rate per lane as the kernel reports it in /sys/class/infiniband/*/ports/*/rate ("200 Gb/sec (4X HDR)").
_LANE_GBPS: Mapping[str, float] = {
    "SDR": 2.5,
    "DDR": 5.0,
    "QDR": 10.0,
    "FDR10": 10.0,
    "FDR": 14.0,
    "EDR": 25.0,
    "HDR": 50.0,
    "NDR": 100.0,
    "XDR": 200.0,
}


class FactsError(ValueError):
    """The host-class facts lack a key or hold a value the renderer cannot use."""


# The inventory's host variable for each section of the facts (provision/ansible_inventory/build.py).
HOST_VARS: Mapping[str, str] = {"hardware": "bringup_hardware", "versions": "bringup_versions",
                                "floors": "bringup_floors"}


def facts_from_host_vars(host_vars: Mapping[str, Any]) -> dict[str, Any]:
    """The facts out of a host's inventory variables (an error names the variables it lacks)."""
    missing = [name for name in HOST_VARS.values() if name not in host_vars]
    if missing:
        raise FactsError(f"host variables {', '.join(missing)} are missing: the bringup inventory exports them")
    return {section: host_vars[name] for section, name in HOST_VARS.items()}


def _section(data: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise FactsError(f"{where}: expected a mapping, got {type(data).__name__}")
    if key not in data:
        raise FactsError(f"{where}.{key}: missing from the host-class facts (have: {', '.join(sorted(data))})")
    return data[key]


def ib_rate_gbps(speed: str, width: str) -> float:
    """The port rate the kernel prints for `width` lanes at `speed` ("HDR", "4X" -> 200)."""
    if str(speed) not in _LANE_GBPS:
        raise FactsError(f"unknown InfiniBand speed {speed!r} (known: {', '.join(_LANE_GBPS)})")
    return _LANE_GBPS[str(speed)] * int(width.rstrip("X"))


def _gpu(hardware: Mapping[str, Any], versions: Mapping[str, Any]) -> dict[str, Any]:
    gpu = _section(hardware, "gpu", "hardware")
    pcie = _section(hardware, "pcie", "hardware")
    out: dict[str, Any] = {
        "count": _section(gpu, "count", "hardware.gpu") if gpu else 0,
        "model": _section(gpu, "model", "hardware.gpu") if gpu else "",
        "nvswitch": bool(_section(hardware, "nvswitch", "hardware")),
    }
    if versions.get("gpu_driver"):
        out["driver_version"] = versions["gpu_driver"]
    if versions.get("cuda"):
        out["cuda_version"] = versions["cuda"]
    if versions.get("vbios"):
        out["vbios_versions"] = [versions["vbios"]]
    if pcie:
        out["pcie_gen"] = _section(pcie, "gpu_gen", "hardware.pcie")
        out["pcie_width"] = _section(pcie, "gpu_width", "hardware.pcie")
    return out


def _ib(hardware: Mapping[str, Any], versions: Mapping[str, Any]) -> dict[str, Any]:
    ib = _section(hardware, "ib", "hardware")
    if not ib:
        return {"hca_count": 0}
    width = _section(ib, "link_width", "hardware.ib")
    out: dict[str, Any] = {
        "hca_count": _section(ib, "hca_count", "hardware.ib"),
        "rate_gbps": ib_rate_gbps(_section(ib, "link_speed", "hardware.ib"), width),
        "width": width,
    }
    if versions.get("hca_firmware"):
        out["firmware"] = [versions["hca_firmware"]]
    pcie = _section(hardware, "pcie", "hardware")
    if pcie and _section(pcie, "hca_gen", "hardware.pcie") is not None:
        out["pcie_gen"] = pcie["hca_gen"]
    if pcie and _section(pcie, "hca_width", "hardware.pcie") is not None:
        out["pcie_width"] = pcie["hca_width"]
    return out


def _long(floors: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if _section(floors, "matmul_tflops", "floors") is not None:
        out["stress_tflops_floor"] = floors["matmul_tflops"]
    if _section(floors, "allreduce_busbw_gbps", "floors") is not None:
        out["allreduce_busbw_floor_gbps"] = floors["allreduce_busbw_gbps"]
    return out


def merge_sections(base: Mapping[str, Any], extra: Any) -> dict[str, Any]:
    """`extra` merged over `base`, mappings key by key (a list or a scalar in `extra` replaces)."""
    out = dict(base)
    if not isinstance(extra, Mapping):
        return out
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_sections(out[key], value)
        else:
            out[key] = value
    return out


def render_agent_expectations(
    facts: Mapping[str, Any], *, hostname: str, level: str = "fast", overlay: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The agent config for `hostname` at `level` from its class's `facts`, `overlay` (agent sections) merged in.

    `long` is rendered only for the long checks ("long", "all"); an overlay's `long` is ignored otherwise.
    The result is unchecked: `tools.health.config.parse_config` is the judge of what the agent accepts.
    """
    if level not in LEVELS:
        raise FactsError(f"level {level!r}: expected one of {', '.join(LEVELS)}")
    hardware = _section(facts, "hardware", "facts")
    versions = _section(facts, "versions", "facts") or {}
    floors = _section(facts, "floors", "facts")
    extra = dict(overlay or {})
    long_extra = extra.pop("long", {})
    config = merge_sections({
        "schema_version": SCHEMA_VERSION,
        "host": hostname,
        "gpu": _gpu(hardware, versions),
        "ib": _ib(hardware, versions),
        "storage": {"disk_max_used_pct": _section(floors, "disk_usage_max_pct", "floors")},
    }, extra)
    if level in _LEVELS_WITH_LONG_CHECKS:
        config["long"] = merge_sections(_long(floors), long_extra)
    return config
