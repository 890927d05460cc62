"""A site's GPU hosts as Debian test hosts: what `python -m sim up` starts for a site with a health-faults file
(the embedded site, the demo).

Every GPU host of the site is a test host (sim/testhosts/hosts.py: an overlay root, its own sshd on 127.0.1.N,
in site order) that Ansible configures over real SSH, whose GPU, IB and kernel tools replay the replay set the
faults file gives it (sim/testhosts/replay.py), whose `ib_write_bw` is a client of the lab's perftest simulator
(sim/testhosts/perftest_client.py), and whose OS carries the faults the file names under `os:` (what someone
did to it before the bring-up: sim/testhosts/faults.py), injected once its sshd answers.

Under the run directory: `ssh/` (the client key, `known_hosts`, `addresses.json` for the controller's SSH
client), `inventory/` (the bringup_state plugin over the site and the state database the environment names,
the chroot switches and the stand-in repository as group variables, each host's address as host variables),
and `hosts/<name>/`.
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from provision.site import Role, load_site
from sim.addresses import lab_host_address
from sim.sshhosts.faults import Faults, load_faults
from sim.testhosts import agent_faults, perftest_client, replay
from sim.testhosts import base as base_fs
from sim.testhosts import faults as os_faults
from sim.testhosts import hosts as th
from sim.testhosts import lab as lab_mod
from sim.testhosts import repo as repo_mod
from sim.testhosts.errors import TestHostError
from sim.testhosts.proc import run

HOST_PYTHON = "/opt/bringup-sim/bin/python"  # exported as BRINGUP_SIM_HOST_PYTHON
_HOST_PYTHON_SHIM = """#!/bin/sh
# bringup test host: Python on the controller, for what a chroot test host cannot hold (PyTorch).
# The command runs in this machine's own root filesystem and under its host name (the lab supervisor's, pid
# {pid}), in the same network namespace, in the same working directory, with this environment:
# sim/testhosts/site_lab.py.
exec /usr/bin/nsenter --uts=/proc/{pid}/ns/uts --root=/proc/{pid}/root \\
  /bin/sh -c 'cd "$1" 2>/dev/null || cd /; shift; exec "$@"' sh "$PWD" {python} "$@"
"""


def _names(site_path: Path) -> list[str]:
    site = load_site(site_path)
    names = [h.hostname for h in site.hosts() if h.role is Role.gpu]
    if not names:
        raise TestHostError(f"{site_path}: no GPU hosts to start")
    return names


def _check_faults(faults: Faults, names: list[str]) -> None:
    for name in names:
        unknown = [f for f in faults.for_host(name).os if f not in os_faults.FAULTS]
        if unknown:
            raise TestHostError(f"{faults.path}: {name}: os fault(s) {', '.join(unknown)} unknown "
                                f"(known: {', '.join(os_faults.FAULTS)})")


def _prepare(host: th.TestHost, faults: Faults, perftest: str) -> None:
    """Before the host's sshd starts: the replayed tools, the perftest client, the controller's Python."""
    replay.install(host.root, faults.fixture_dir(host.name), faults.for_host(host.name).tools)
    agent_faults.install(host.root, faults.for_host(host.name))
    perftest_client.install(host.root, perftest)
    shim = host.root / HOST_PYTHON.lstrip("/")
    shim.parent.mkdir(parents=True, exist_ok=True)
    shim.write_text(_HOST_PYTHON_SHIM.format(pid=os.getpid(), python=sys.executable))
    shim.chmod(0o755)
    # The checkout's directory exists (empty) on the host, so a launcher's `cd` there before the shim works and
    # the shim runs in the same directory on this machine.
    (host.root / lab_mod.REPO_ROOT.relative_to("/")).mkdir(parents=True, exist_ok=True)


def _ssh_vars(run_dir: Path, host: th.TestHost) -> dict[str, object]:
    known = run_dir / "ssh" / "known_hosts"
    return {"ansible_host": host.address, "ansible_port": 22, "ansible_user": "root",
            "ansible_ssh_private_key_file": str(run_dir / "ssh" / "id_ed25519"),
            "ansible_ssh_common_args": f"-o ConnectTimeout=10 -o UserKnownHostsFile={known} "
                                       "-o StrictHostKeyChecking=yes"}


def _client_files(run_dir: Path, site_path: Path, hosts: tuple[th.TestHost, ...], keys: list[str],
                  url: str, fingerprint: str) -> None:
    ssh = run_dir / "ssh"
    (ssh / "known_hosts").write_text(
        "".join(f"{h.address} {' '.join(k.split()[:2])}\n" for h, k in zip(hosts, keys, strict=True)))
    (ssh / "addresses.json").write_text(json.dumps({h.name: f"{h.address}:22" for h in hosts}, indent=1))
    # No db: the plugin reads $BRINGUP_STATE_DB, else the site's own database, as `provision` does.
    lab_mod.write_inventory(run_dir, url, fingerprint,
                            f"plugin: bringup_state\nsite: {site_path.resolve()}\n")
    host_vars = run_dir / "inventory" / "host_vars"
    for host in hosts:
        (host_vars / f"{host.name}.yml").write_text(
            "# Generated by sim.testhosts.site_lab: where this test host answers.\n"
            + yaml.safe_dump(_ssh_vars(run_dir, host), sort_keys=True))


def up(run_dir: Path, site_path: Path, faults_path: Path, perftest: str) -> lab_mod.Lab:
    """Start a test host for every GPU host of the site; on any error stop what started."""
    run_dir = run_dir.resolve()
    lab_mod.claim(run_dir)  # ends a dead run's leftovers; binds the hosts to this process (sim/lifetime.py)
    names = _names(site_path)
    faults = load_faults(faults_path)
    _check_faults(faults, names)
    (run_dir / "ssh").mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=2) as pool:
        base_job = pool.submit(base_fs.ensure_base, log=False)
        repo_job = pool.submit(repo_mod.build, log=False)
        base, repo = base_job.result(), repo_job.result()
    key = run_dir / "ssh" / "id_ed25519"
    if not key.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bringup-sim", "-f", str(key)])
    hosts = tuple(th.TestHost(n, lab_host_address(i + 1), run_dir / "hosts" / n) for i, n in enumerate(names))
    state: dict[str, object] = {"hosts": [{"name": h.name, "address": h.address, "directory": str(h.directory)}
                                          for h in hosts]}
    (run_dir / lab_mod.STATE_FILE).write_text(json.dumps(state, indent=2))
    try:
        server_pid, port = lab_mod.serve_repository(repo.root, run_dir)
        state["server_pid"] = server_pid
        (run_dir / lab_mod.STATE_FILE).write_text(json.dumps(state, indent=2))
        url = f"http://{lab_mod.REPO_ADDRESS}:{port}"
        extra = lab_mod.distro_source(url, repo.key_path.read_text())
        authorized = (run_dir / "ssh" / "id_ed25519.pub").read_text()
        with ThreadPoolExecutor(max_workers=8) as pool:
            keys = list(pool.map(lambda h: th.start(h, base, authorized, extra,
                                                    lambda x: _prepare(x, faults, perftest)), hosts))
        _client_files(run_dir, site_path, hosts, keys, url, repo.fingerprint)
        lab = lab_mod.Lab(run_dir=run_dir, hosts=hosts, repo_url=url, fingerprint=repo.fingerprint)
        injected = [(h.name, f) for h in hosts for f in faults.for_host(h.name).os]
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda item: os_faults.inject(lab, *item), injected))
    except BaseException:
        lab_mod.down(run_dir)
        raise
    return lab
