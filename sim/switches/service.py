"""Plugs the switch simulator into `python -m sim up` when the site has an Ethernet design (ethernet.yml)
naming switches on the lab's switch addresses."""

from __future__ import annotations

import json

from sim.addresses import SWITCHES
from sim.lab import LabContext, Service, python_module, tcp_probe
from sim.switches.embedded import PASSWORD_VARIABLE, embedded


def services(ctx: LabContext) -> list[Service]:
    if not (ctx.site.directory / "ethernet.yml").is_file():
        return []
    _, asbuilt = embedded(ctx.site)
    if not asbuilt["switches"] or any(not s["address"].startswith(str(SWITCHES.network_address)[:-1])
                                      for s in asbuilt["switches"]):
        return []
    folder = ctx.run_dir / "switches"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "asbuilt.json"
    path.write_text(json.dumps(asbuilt))
    last = asbuilt["switches"][-1]
    return [Service(name="switches", argv=python_module("sim.switches", str(path)),
                    probe=tcp_probe(last["address"], int(last["port"])),
                    env={PASSWORD_VARIABLE: ctx.secrets[PASSWORD_VARIABLE]}, start_timeout_s=30.0)]
