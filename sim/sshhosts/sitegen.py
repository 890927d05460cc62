"""A site file of N GPU hosts shaped like the embedded sim site, for tests and benchmarks at scale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from provision.site import load_site
from provision.site.model import Site

_PER_RACK = 32


def site_document(
    name: str, count: int, *, host_class: str, class_spec: dict[str, Any], policy: dict[str, Any]
) -> dict[str, Any]:
    racks = []
    for r in range((count + _PER_RACK - 1) // _PER_RACK):
        hosts = []
        for i in range(r * _PER_RACK, min(count, (r + 1) * _PER_RACK)):
            hosts.append(
                {
                    "hostname": f"gpu-{i + 1:04d}",
                    "u": 1 + (i % _PER_RACK),
                    "role": "gpu",
                    "class": host_class,
                    "bmc": {"address": f"10.200.{i // 250}.{i % 250 + 1}", "port": 443, "credential": "bmc"},
                }
            )
        racks.append({"name": f"r{r + 1:02d}", "height_u": 48, "hosts": hosts})
    return {
        "name": name,
        "credentials": {"bmc": {"username": "root", "password": {"env": "BRINGUP_SIM_BMC_PASSWORD"}}},
        "host_classes": {host_class: class_spec},
        "policy": policy,
        "racks": racks,
    }


def class_from(template: Site, host_class: str) -> dict[str, Any]:
    spec: dict[str, Any] = template.spec.host_classes[host_class].model_dump(mode="json", exclude_defaults=True)
    return spec


def write_site(
    directory: Path,
    count: int,
    *,
    class_spec: dict[str, Any] | None = None,
    template: Path | None = None,
    host_class: str = "hgx-h200-sim",
    name: str = "scale",
    policy: dict[str, Any] | None = None,
) -> Path:
    """Write `directory/site.yml` with `count` hosts of one class: `class_spec`, or `host_class` of `template`."""
    if class_spec is None:
        if template is None:
            raise ValueError("give class_spec or a template site")
        class_spec = class_from(load_site(template), host_class)
    doc = site_document(name, count, host_class=host_class, class_spec=class_spec, policy=policy or {})
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "site.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path
