"""A site file of N GPU hosts shaped like the embedded sim site, for tests and benchmarks at scale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from provision.site import load_site
from provision.site.model import Site

_PER_RACK = 32


def site_document(name: str, count: int, *, template: Site, host_class: str, policy: dict[str, Any]) -> dict[str, Any]:
    cls = template.spec.host_classes[host_class]
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
        "host_classes": {host_class: cls.model_dump(mode="json", exclude_defaults=True)},
        "policy": policy,
        "racks": racks,
    }


def write_site(
    directory: Path,
    count: int,
    *,
    template: Path,
    host_class: str = "hgx-h200-sim",
    name: str = "scale",
    policy: dict[str, Any] | None = None,
) -> Path:
    """Write `directory/site.yml` with `count` hosts of `host_class` copied from the `template` site."""
    doc = site_document(
        name, count, template=load_site(template), host_class=host_class, policy=policy or {}
    )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "site.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path
