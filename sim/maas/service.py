"""Plugs the MAAS API simulator into `python -m sim up` when the site's MAAS is on the lab's address."""

from __future__ import annotations

import json

import yaml

from sim.addresses import MAAS_ADDRESS
from sim.lab import LabContext, Service, lab_port, python_module, tcp_probe


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
    rendered.write_text(json.dumps(config or {}))
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
