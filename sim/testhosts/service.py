"""The lab's GPU hosts for a site with a health-faults file (the embedded site, the demo): every GPU host a
Debian test host (sim/testhosts/site_lab.py), and the perftest simulator their `ib_write_bw` talks to.

Exports what the controller honours over the site's `ssh:` section (`BRINGUP_SSH_KEY_FILE`,
`BRINGUP_SSH_KNOWN_HOSTS`, `BRINGUP_SSH_ADDRESS_MAP`), the replayed H200's health expectations
(`BRINGUP_HEALTH_EXPECTATIONS`, unless the site has its own `health-expectations.yml`), the Ansible inventory
of the hosts (`BRINGUP_SIM_INVENTORY`: `ansible-playbook -i "$BRINGUP_SIM_INVENTORY" site.yml`), and
`BRINGUP_SIM_HOST_PYTHON`: the path, on every test host, of a Python that runs on this machine's own root
filesystem under its host name (same network namespace, same working directory), for what a chroot host
cannot hold (PyTorch ranks launched over SSH). The first start runs debootstrap and builds the stand-in
repository (cached).
"""

from __future__ import annotations

from provision.health.expectations import ENV_OVERLAY, OVERLAY_FILE
from provision.ssh import ENV_ADDRESS_MAP, ENV_KEY_FILE, ENV_KNOWN_HOSTS
from sim.lab import LabContext, Service, python_module, tcp_probe
from sim.sshhosts.service import REPLAYED_EXPECTATIONS, faults_file
from sim.testhosts.lab import READY_FILE
from sim.testhosts.site_lab import HOST_PYTHON

SUBDIR = "gpuhosts"  # under the lab's run directory
PERFTEST = ("127.0.2.31", 18515)  # the perftest simulator (services range of sim/addresses.py)
ENV_INVENTORY = "BRINGUP_SIM_INVENTORY"
ENV_HOST_PYTHON = "BRINGUP_SIM_HOST_PYTHON"


def services(ctx: LabContext) -> list[Service]:
    faults = faults_file(ctx)
    if faults is None:
        return []
    directory = ctx.run_dir / SUBDIR
    address, port = PERFTEST
    exports = {
        ENV_KEY_FILE: str(directory / "ssh" / "id_ed25519"),
        ENV_KNOWN_HOSTS: str(directory / "ssh" / "known_hosts"),
        ENV_ADDRESS_MAP: str(directory / "ssh" / "addresses.json"),
        ENV_INVENTORY: str(directory / "inventory" / "testhosts.bringup_state.yml"),
        ENV_HOST_PYTHON: HOST_PYTHON,
    }
    if not (ctx.site.directory / OVERLAY_FILE).is_file():
        exports[ENV_OVERLAY] = str(REPLAYED_EXPECTATIONS)
    site = str(ctx.site.path)
    return [
        Service(name="perftest",
                argv=python_module("sim.testhosts.perftest_service", "--site", site, "--faults", str(faults),
                                   "--listen", f"{address}:{port}"),
                probe=tcp_probe(address, port)),
        Service(name="gpuhosts",
                argv=python_module("sim.testhosts", "site-serve", "--site", site, "--faults", str(faults),
                                   "--perftest", f"{address}:{port}", "--run-dir", str(directory)),
                probe=lambda: (directory / READY_FILE).exists(),
                start_timeout_s=1800.0, stop_timeout_s=120.0, exports=exports, early=True),
    ]


def cleanup(ctx: LabContext) -> list[str]:
    """After `sim down`: stop hosts a supervisor left behind (killed before it could stop them)."""
    from sim.testhosts.lab import STATE_FILE, down

    directory = ctx.run_dir / SUBDIR
    if not (directory / STATE_FILE).exists() and not (directory / "hosts").is_dir():
        return []
    return down(directory)
