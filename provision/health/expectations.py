"""The agent's expectations for one host, rendered from the site file (the JSON `tools/health/config.py` reads).

What the site model declares (GPU model and count, versions, PCIe, IB, floors) is rendered from it.
Expectations the site model has no field for (kernel log lines that are normal on this hardware,
NVLinks per GPU, CPU governor, clock sync, the long checks' memory-bandwidth floor) come from an
optional `health-expectations.yml` beside the site file (or `$BRINGUP_HEALTH_EXPECTATIONS`), per host
class, in the agent's own config shape, merged over the rendered part:

    host_classes:
      hgx-h200-sim:
        gpu: {nvlinks_per_gpu: 18}
        kernel_log: {expected_patterns: ["^software IO TLB: No low mem$"]}
        system: {cpu_governor: performance}
        long: {membw_floor_gbps: 3800}

Everything else keeps the agent's own defaults (its policy: Xid lists, counter thresholds).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from provision.health.errors import HealthError
from provision.site.model import Host, HostClass, IbSpeed, Site

ENV_OVERLAY = "BRINGUP_HEALTH_EXPECTATIONS"
OVERLAY_FILE = "health-expectations.yml"

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


def _long(cls: HostClass, extra: Mapping[str, Any]) -> dict[str, Any]:
    floors = cls.floors
    out: dict[str, Any] = {}
    if floors.matmul_tflops is not None:
        out["stress_tflops_floor"] = floors.matmul_tflops
    if floors.allreduce_busbw_gbps is not None:
        out["allreduce_busbw_floor_gbps"] = floors.allreduce_busbw_gbps
    return _merge(out, extra.get("long", {}))


def _merge(base: dict[str, Any], extra: Any) -> dict[str, Any]:
    out = dict(base)
    if not isinstance(extra, Mapping):
        return out
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_overlay(site: Site, environ: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Per host class, the expectations from `health-expectations.yml` (empty when there is none)."""
    env = os.environ if environ is None else environ
    path = Path(env[ENV_OVERLAY]) if env.get(ENV_OVERLAY) else site.directory / OVERLAY_FILE
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise HealthError(f"{path}: cannot read ({exc})") from None
    classes = data.get("host_classes") if isinstance(data, dict) else None
    if not isinstance(classes, dict) or not all(isinstance(v, dict) for v in classes.values()):
        raise HealthError(f"{path}: expected host_classes: {{<class>: {{<agent config section>: ...}}}}")
    unknown = sorted(set(classes) - set(site.spec.host_classes))
    if unknown:
        raise HealthError(f"{path}: host classes not in the site: {', '.join(unknown)}")
    return {str(name): dict(value) for name, value in classes.items()}


def render_expectations(
    site: Site, host: Host, level: str, overlay: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """The agent config for `host` at `level` ("fast" or "long"), `overlay` merged in, unchecked."""
    cls = site.host_class(host)
    extra = dict((overlay or {}).get(host.host_class, {}))
    config: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "host": host.hostname,
        "gpu": _gpu(cls),
        "ib": _ib(cls),
        "storage": {"disk_max_used_pct": cls.floors.disk_usage_max_pct},
    }
    long_extra = extra.pop("long", {})
    config = _merge(config, extra)
    if level == "long":
        config["long"] = _long(cls, {"long": long_extra})
    return config


def validate_expectations(config: Mapping[str, Any], what: str) -> None:
    """Check `config` with the agent's own loader, so a mistake is one error here, not one per host."""
    loader: Any = importlib.import_module("tools.health.config")
    try:
        loader.parse_config(config)
    except loader.ConfigError as exc:
        problems = "; ".join(str(p) for p in getattr(exc, "problems", [exc]))
        raise HealthError(f"{what}: the health agent would reject its expectations: {problems}") from None
