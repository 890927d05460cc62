"""Plugs the MAAS API simulator into `python -m sim up` when the site's MAAS is on the lab's address."""

from __future__ import annotations

import json
from typing import Any

import yaml

from sim.addresses import MAAS_ADDRESS
from sim.lab import LabContext, Service, lab_port, python_module, tcp_probe
from sim.switches.asbuilt import PXE_VLAN
from sim.switches.embedded import lab_hosts


def pxe_network(ctx: LabContext) -> dict[str, Any]:
    """Where PXE boots are decided (sim/maas/pxe.py): the switch simulator's as-built file (sim/switches/service.py
    writes it for a site with an Ethernet design), the PXE VLAN, and the boot MACs the lab's Ethernet cables."""
    if not (ctx.site.directory / "ethernet.yml").is_file():
        return {}
    return {"pxe": {"asbuilt": str(ctx.run_dir / "switches" / "asbuilt.json"), "vlan": PXE_VLAN,
                    "macs": [h.pxe_mac for h in lab_hosts(ctx.site)]}}


def services(ctx: LabContext) -> list[Service]:
    maas = ctx.site.spec.maas
    if maas is None:
        return []
    port = lab_port(maas.url, MAAS_ADDRESS, 5240)
    if port is None:
        return []
    config_file = ctx.site.directory / "maas.yml"
    config = yaml.safe_load(config_file.read_text()) if config_file.exists() else {}
    rendered = ctx.run_dir / "maas.json"
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    rendered.write_text(json.dumps({**(config or {}), **pxe_network(ctx)}))
    return [
        Service(
            name="maas",
            argv=python_module(
                "sim.maas.server", "--address", MAAS_ADDRESS, "--port", str(port), "--config", str(rendered)
            ),
            probe=tcp_probe(MAAS_ADDRESS, port),
            env={"BRINGUP_SIM_MAAS_API_KEY": ctx.secrets["BRINGUP_SIM_MAAS_API_KEY"]},
        )
    ]
