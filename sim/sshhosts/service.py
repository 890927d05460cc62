"""The lab's `sshhosts` service: every GPU host of the site as an SSH endpoint on 127.0.32.0/20.

It exports, for `provision health` and `provision bisect` (which honour them over the site's `ssh:`):
`BRINGUP_SSH_KEY_FILE`, `BRINGUP_SSH_KNOWN_HOSTS` and `BRINGUP_SSH_ADDRESS_MAP`; and, for a site without
its own `health-expectations.yml`, `BRINGUP_HEALTH_EXPECTATIONS` (the replayed H200's expectations). The faults file is
`health-faults.yml` beside the site file, or `$BRINGUP_SIM_HEALTH_FAULTS`; a site without one has no
simulated SSH hosts.
"""

from __future__ import annotations

import os
from pathlib import Path

from provision.health.expectations import ENV_OVERLAY, OVERLAY_FILE
from provision.ssh import ENV_ADDRESS_MAP, ENV_KEY_FILE, ENV_KNOWN_HOSTS
from sim.lab import LabContext, Service, python_module
from sim.sshhosts.addresses import DEFAULT_PORT
from sim.sshhosts.server import Files

ENV_FAULTS_FILE = "BRINGUP_SIM_HEALTH_FAULTS"
REPLAYED_EXPECTATIONS = Path(__file__).with_name("replayed-h200-expectations.yml")
# Not started by `python -m sim up`: a site's GPU hosts there are Debian test hosts (sim/testhosts/service.py).
# These endpoints serve the 512/4,064-host benchmarks and their tests (harness.py).
LAB_DEFAULT = False


def faults_file(ctx: LabContext) -> Path | None:
    env = os.environ.get(ENV_FAULTS_FILE)
    path = Path(env) if env else ctx.site.directory / "health-faults.yml"
    return path if path.is_file() else None


def ready_probe(files: Files, pidfile: Path) -> bool:
    try:
        return files.ready.read_text().strip() == pidfile.read_text().strip()
    except OSError:
        return False


def services(ctx: LabContext) -> list[Service]:
    faults = faults_file(ctx)
    if faults is None:
        return []
    files = Files(ctx.run_dir / "sshhosts")
    pidfile = ctx.run_dir / "sshhosts.pid"
    exports = {
        ENV_KEY_FILE: str(files.client_key),
        ENV_KNOWN_HOSTS: str(files.known_hosts),
        ENV_ADDRESS_MAP: str(files.address_map),
    }
    if not (ctx.site.directory / OVERLAY_FILE).is_file():
        # The replayed machine's expectations, unless the site brings its own.
        exports[ENV_OVERLAY] = str(REPLAYED_EXPECTATIONS)
    argv = python_module(
        "sim.sshhosts", "--site", str(ctx.site.path), "--run-dir", str(ctx.run_dir), "--faults", str(faults),
        "--port", str(DEFAULT_PORT),
    )
    return [
        Service(
            name="sshhosts",
            argv=argv,
            probe=lambda: ready_probe(files, pidfile),
            start_timeout_s=60.0,
            exports=exports,
        )
    ]
