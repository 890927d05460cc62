"""The agent's expectations for one host, rendered from the site file (the JSON `tools/health/config.py` reads).

What the site model declares (GPU model and count, versions, PCIe, IB, floors) is rendered from it: the host
class becomes plain facts (`host_class_facts`, the shape of the Ansible inventory's host variables) and
`provision.health.agent_expectations` renders them, the renderer the health_agent role's filter runs too.
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

from provision.health.agent_expectations import SCHEMA_VERSION, ib_rate_gbps, render_agent_expectations
from provision.health.errors import HealthError
from provision.site.bounded import MAX_OVERLAY_BYTES, InputRefused, load_yaml, read_text
from provision.site.model import Host, HostClass, Site

ENV_OVERLAY = "BRINGUP_HEALTH_EXPECTATIONS"
OVERLAY_FILE = "health-expectations.yml"

__all__ = [
    "ENV_OVERLAY", "OVERLAY_FILE", "SCHEMA_VERSION", "host_class_facts", "ib_rate_gbps", "load_overlay",
    "render_expectations", "validate_expectations",
]


def host_class_facts(cls: HostClass) -> dict[str, Any]:
    """`cls` as the plain facts the renderer reads: the shape of the inventory's `bringup_hardware`,
    `bringup_versions` and `bringup_floors` host variables (the role renders from those)."""
    return {
        "hardware": {
            "gpu": cls.gpu.model_dump(mode="json") if cls.gpu else None,
            "ib": cls.ib.model_dump(mode="json") if cls.ib else None,
            "pcie": cls.pcie.model_dump(mode="json") if cls.pcie else None,
            "nvme_data_disks": cls.nvme_data_disks,
            "nvswitch": cls.nvswitch,
        },
        "versions": cls.version_facts(),  # with the firmware baseline's HCA/GPU pins (#40)
        "floors": cls.floors.model_dump(mode="json"),
    }


def load_overlay(site: Site, environ: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Per host class, the expectations from `health-expectations.yml` (empty when there is none)."""
    env = os.environ if environ is None else environ
    path = Path(env[ENV_OVERLAY]) if env.get(ENV_OVERLAY) else site.directory / OVERLAY_FILE
    if not path.exists():  # a device, FIFO or directory there is refused below, not taken for "none"
        return {}
    try:
        data = load_yaml(read_text(path, limit=MAX_OVERLAY_BYTES, what="health overlay")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError, InputRefused) as exc:
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
    """The agent config for `host` at `level` ("fast" or "long"), its class's `overlay` merged in, unchecked."""
    return render_agent_expectations(
        host_class_facts(site.host_class(host)),
        hostname=host.hostname,
        level=level,
        overlay=(overlay or {}).get(host.host_class),
    )


def validate_expectations(config: Mapping[str, Any], what: str) -> None:
    """Check `config` with the agent's own loader, so a mistake is one error here, not one per host."""
    loader: Any = importlib.import_module("tools.health.config")
    try:
        loader.parse_config(config)
    except loader.ConfigError as exc:
        problems = "; ".join(str(p) for p in getattr(exc, "problems", [exc]))
        raise HealthError(f"{what}: the health agent would reject its expectations: {problems}") from None
