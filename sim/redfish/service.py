"""The Redfish simulator as a service of the simulated lab (`sim up`)."""

from __future__ import annotations

from sim.lab import LabContext, Service, python_module, tcp_probe

CONTROL_ADDRESS = "127.0.2.10"
CONTROL_PORT = 8440


def services(ctx: LabContext) -> list[Service]:
    hosts = ctx.site.hosts()
    if not hosts:
        return []
    argv = python_module("sim.redfish", "--site", str(ctx.site.path), "--cert-dir", str(ctx.run_dir / "redfish"),
                         "--control", f"{CONTROL_ADDRESS}:{CONTROL_PORT}")
    faults = ctx.site.directory / "faults.yml"
    if faults.exists():
        argv += ["--faults", str(faults)]
    return [Service(
        name="redfish",
        argv=argv,
        # The control API starts after every BMC listener, so it answering means all are up.
        probe=tcp_probe(CONTROL_ADDRESS, CONTROL_PORT),
        env={k: v for k, v in ctx.secrets.items() if k.endswith("BMC_PASSWORD")},
        exports={"BRINGUP_SIM_REDFISH_CONTROL": f"http://{CONTROL_ADDRESS}:{CONTROL_PORT}",
                 "BRINGUP_SIM_BMC_CA": str(ctx.run_dir / "redfish" / "ca.pem")},
    )]
