"""The agent's expectations for one host, rendered from the site file (the JSON `tools/health/config.py` reads).

Only what the site declares is rendered; everything else keeps the agent's own defaults (its policy:
Xid lists, counter thresholds). Pure: site in, dict out.
"""

from __future__ import annotations

from typing import Any

from provision.health.errors import HealthError
from provision.site.model import Host, HostClass, IbSpeed, Site

SCHEMA_VERSION = 1

# Data rate per lane as the kernel reports it in /sys/class/infiniband/*/ports/*/rate ("200 Gb/sec (4X HDR)").
_LANE_GBPS: dict[IbSpeed, float] = {
    IbSpeed.SDR: 2.5,
    IbSpeed.DDR: 5.0,
    IbSpeed.QDR: 10.0,
    IbSpeed.FDR10: 10.0,
    IbSpeed.FDR: 14.0,
    IbSpeed.EDR: 25.0,
    IbSpeed.HDR: 50.0,
    IbSpeed.NDR: 100.0,
    IbSpeed.XDR: 200.0,
}


def ib_rate_gbps(speed: IbSpeed, width: str) -> float:
    return _LANE_GBPS[speed] * int(width.rstrip("X"))


def _gpu(cls: HostClass) -> dict[str, Any]:
    versions = cls.versions
    out: dict[str, Any] = {
        "count": cls.gpu.count if cls.gpu else 0,
        "model": cls.gpu.model if cls.gpu else "",
        "nvswitch": cls.nvswitch,
    }
    if versions.gpu_driver:
        out["driver_version"] = versions.gpu_driver
    if versions.cuda:
        out["cuda_version"] = versions.cuda
    if versions.vbios:
        out["vbios_versions"] = [versions.vbios]
    if cls.pcie is not None:
        out["pcie_gen"] = cls.pcie.gpu_gen
        out["pcie_width"] = cls.pcie.gpu_width
    return out


def _ib(cls: HostClass) -> dict[str, Any]:
    if cls.ib is None:
        return {"hca_count": 0}
    out: dict[str, Any] = {
        "hca_count": cls.ib.hca_count,
        "rate_gbps": ib_rate_gbps(cls.ib.link_speed, cls.ib.link_width),
        "width": cls.ib.link_width,
    }
    if cls.versions.hca_firmware:
        out["firmware"] = [cls.versions.hca_firmware]
    if cls.pcie is not None and cls.pcie.hca_gen is not None:
        out["pcie_gen"] = cls.pcie.hca_gen
    if cls.pcie is not None and cls.pcie.hca_width is not None:
        out["pcie_width"] = cls.pcie.hca_width
    return out


def _long(host: Host, cls: HostClass) -> dict[str, Any]:
    floors = cls.floors
    # The site model has no memory-bandwidth floor yet; read it once the model grows one.
    membw: float | None = getattr(floors, "membw_gbps", None)
    missing = [
        name
        for name, value in (
            ("matmul_tflops", floors.matmul_tflops),
            ("allreduce_busbw_gbps", floors.allreduce_busbw_gbps),
            ("membw_gbps", membw),
        )
        if value is None
    ]
    if missing:
        raise HealthError(
            f"{host.hostname}: host class {host.host_class!r} declares no {', '.join(missing)} floor(s); "
            "the long checks judge against them (add them under floors: in the site file)"
        )
    return {
        "stress_tflops_floor": floors.matmul_tflops,
        "membw_floor_gbps": membw,
        "allreduce_busbw_floor_gbps": floors.allreduce_busbw_gbps,
    }


def render_expectations(site: Site, host: Host, level: str) -> dict[str, Any]:
    """The agent config for `host` at `level` ("fast" or "long")."""
    cls = site.host_class(host)
    config: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "host": host.hostname,
        "gpu": _gpu(cls),
        "ib": _ib(cls),
        "storage": {"disk_max_used_pct": cls.floors.disk_usage_max_pct},
    }
    if level == "long":
        config["long"] = _long(host, cls)
    return config
