"""Plugs the UFM REST simulator into `python -m sim up` when the site's `fabric.ufm` is on the lab's address."""

from __future__ import annotations

from sim.addresses import UFM_ADDRESS
from sim.lab import LabContext, Service, lab_port, python_module, tcp_probe
from sim.site_paths import ibsim_state

PASSWORD_VARIABLE = "BRINGUP_SIM_UFM_PASSWORD"


def services(ctx: LabContext) -> list[Service]:
    fabric = ctx.site.spec.fabric
    ufm = fabric.ufm if fabric is not None else None
    if ufm is None:
        return []
    port = lab_port(ufm.url, UFM_ADDRESS, 443)
    if port is None:
        return []
    user = ctx.site.spec.credentials[ufm.credential].username
    faults = ctx.site.directory / "ufm-faults.yml"
    argv = python_module("sim.ufm.server", "--address", UFM_ADDRESS, "--port", str(port), "--user", user,
                         "--ibsim-state", str(ibsim_state(ctx.site.paths)), "--cert-dir", str(ctx.run_dir / "ufm"))
    if faults.is_file() and ctx.site.fabric_design is not None:
        argv += ["--faults", str(faults), "--design", str(ctx.site.fabric_design)]
    return [Service(name="ufm", argv=argv, probe=tcp_probe(UFM_ADDRESS, port),
                    env={PASSWORD_VARIABLE: ctx.secrets[PASSWORD_VARIABLE]}, start_timeout_s=60.0)]
