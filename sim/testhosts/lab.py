"""`up`/`down` of N Debian test hosts with their site file, state store and Ansible inventory.

A run directory holds everything of one run: the SSH key made for it, each host's overlay, the
generated site file (the embedded sim site's first N GPU hosts, reached on 127.0.1.N), the state
store (hosts marked `deployed`, as MAAS would leave them), and `inventory/` with the bringup_state
plugin config and the group variables that point the roles at the stand-in repository and turn off
what a chroot cannot do (service starts, kernel modules, pool creation).

Every process of a run (each host's sshd and its sessions, the repository server) dies with the process that
called `up` (sim/lifetime.py), and the watchdog that ends them unmounts the hosts' mounts, unless it is
`python -m sim.testhosts up`'s `detached` run (until `down`); a run directory whose starter and watchdog both
died uncleanly is cleaned by the next `up` there.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from provision.command.context import EMBEDDED_SITE
from provision.site.paths import SitePaths
from provision.state import State, StateStore
from sim import lifetime
from sim.addresses import free_port as _free_port
from sim.addresses import lab_host_address
from sim.testhosts import base as base_fs
from sim.testhosts import hosts as th
from sim.testhosts import repo as repo_mod
from sim.testhosts.errors import TestHostError
from sim.testhosts.proc import run

REPO_ADDRESS = "127.0.2.30"  # the stand-in apt repository's HTTP server (services range of sim/addresses.py)
REPO_ROOT = Path(__file__).resolve().parents[2]
DISKS = Path(__file__).resolve().parent / "disks"
DEFAULT_DISKS = "hgx-2os-4data.json"
TEST_CLASS = "hgx-h200-testhost"
SITE_NAME = "testhosts"
STATE_FILE = "testhosts.json"
READY_FILE = "ready"  # written by `serve` once every host answers; removed by `down`
OWNER_FILE = "owner"  # the pid and start time of the process that ran `up` (or DETACHED); removed by `down`
DETACHED = "detached"
ENV_KEEP_FILES = "BRINGUP_SIM_KEEP_HOST_FILES"

# Role switches for a chroot: what needs a running kernel or init is off; everything else runs.
CHROOT_VARS: dict[str, Any] = {
    "common_manage_services": False,
    "common_apply_runtime": False,
    "nvidia_driver_manage_services": False,
    "nvidia_driver_load_modules": False,
    "nvidia_driver_simulate_reboot": True,
    "nvidia_fabricmanager_manage_services": False,
    "ofed_manage_services": False,
    "gpudirect_rdma_load_module": False,
    "container_runtime_manage_services": False,
    "dcgm_manage_services": False,
    "node_exporter_manage_services": False,
    "health_agent_manage_services": False,
    "prometheus_server_manage_services": False,
    "alertmanager_manage_services": False,
    "munge_manage_services": False,
    "slurm_controller_manage_services": False,
    "slurm_node_manage_services": False,
    "zfs_raidz_create": False,
    # No archive access: the stand-in `distro` repository carries Debian's contrib zfs packages itself.
    "zfs_raidz_contrib": False,
}


@dataclass(frozen=True)
class Lab:
    run_dir: Path
    hosts: tuple[th.TestHost, ...]
    repo_url: str
    fingerprint: str

    @property
    def inventory(self) -> Path:
        return self.run_dir / "inventory" / "testhosts.bringup_state.yml"

    @property
    def site_file(self) -> Path:
        return self.run_dir / "site.yml"

    @property
    def state_db(self) -> Path:
        return _site_paths(self.run_dir).default_state_db

    @property
    def ssh_key(self) -> Path:
        return self.run_dir / "ssh" / "id_ed25519"

    def host(self, name: str) -> th.TestHost:
        return next(h for h in self.hosts if h.name == name)


def serve_repository(root: Path, run_dir: Path) -> tuple[int, int]:
    """The stand-in repository over HTTP on REPO_ADDRESS: (server pid, port)."""
    port = _free_port(REPO_ADDRESS)
    log = (run_dir / "repo-http.log").open("ab")
    process = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", REPO_ADDRESS,
                                "--directory", str(root)], stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((REPO_ADDRESS, port), timeout=0.5):
                return process.pid, port
        except OSError:
            time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    raise TestHostError(f"the stand-in repository server did not listen on {REPO_ADDRESS}:{port}")


def _gpu_hosts(site_doc: dict[str, Any], count: int) -> list[tuple[str, dict[str, Any]]]:
    found = [(rack["name"], host) for rack in site_doc["racks"] for host in rack["hosts"] if host["role"] == "gpu"]
    if count > len(found):
        raise TestHostError(f"the embedded site has {len(found)} GPU hosts; asked for {count}")
    return found[:count]


def write_site(run_dir: Path, count: int) -> tuple[Path, list[str]]:
    """The test site: the embedded site's first `count` GPU hosts, reached on 127.0.1.N over SSH."""
    doc = yaml.safe_load(EMBEDDED_SITE.read_text(encoding="utf-8"))
    chosen = _gpu_hosts(doc, count)
    source_class = chosen[0][1]["class"]
    host_class = dict(doc["host_classes"][source_class])
    # HGX baseboards carry NVSwitches: the test class has them so nvidia_fabricmanager runs for real.
    host_class["nvswitch"] = True
    host_class["description"] = "Debian 12 chroot test host shaped after " + source_class
    racks: dict[str, list[dict[str, Any]]] = {}
    for rack, host in chosen:
        racks.setdefault(rack, []).append({**host, "class": TEST_CLASS})
    names = [host["hostname"] for _, host in chosen]
    site = {
        "name": SITE_NAME,
        "description": f"{count} Debian test hosts (sim.testhosts)",
        "ssh": {"user": "root", "port": 22, "key_file": "ssh/id_ed25519", "known_hosts": "ssh/known_hosts",
                "connect_timeout_s": 10,
                "address_overrides": {name: lab_host_address(i + 1) for i, name in enumerate(names)}},
        "credentials": doc.get("credentials", {}),
        "host_classes": {TEST_CLASS: host_class},
        "racks": [{"name": rack, "hosts": hosts} for rack, hosts in racks.items()],
    }
    path = run_dir / "site.yml"
    path.write_text("# Generated by sim.testhosts; do not edit.\n" + yaml.safe_dump(site, sort_keys=False))
    return path, names


def _group_vars(run_dir: Path, url: str, fingerprint: str) -> dict[str, Any]:
    key = f"{url}/keys/{repo_mod.KEY_NAME}"
    return {
        **CHROOT_VARS,
        "nvidia_driver_repo_url": f"{url}/cuda/",
        "nvidia_driver_repo_key_url": key,
        "nvidia_driver_repo_key_fingerprint": fingerprint,
        "container_runtime_docker_repo_url": f"{url}/docker",
        "container_runtime_docker_repo_key_url": key,
        "container_runtime_docker_repo_key_fingerprint": fingerprint,
        "container_runtime_toolkit_repo_url": f"{url}/toolkit/",
        "container_runtime_toolkit_repo_key_url": key,
        "container_runtime_toolkit_repo_key_fingerprint": fingerprint,
        "ofed_doca_repo_url": f"{url}/doca/",
        "ofed_mlnx_repo_url": f"{url}/mlnx/",
        "ofed_repo_key_url": key,
        "ofed_repo_key_fingerprint": fingerprint,
        "zfs_raidz_lsblk_json": "{{ lookup('ansible.builtin.file', bringup_testhost_disks) }}",
        "bringup_testhost_disks": str(DISKS / DEFAULT_DISKS),
        # MUNGE's key for a site with a slurm section (roles/munge): made by write_inventory, the run's own
        "munge_key_file": str(run_dir / "munge.key"),
    }


def write_inventory(run_dir: Path, url: str, fingerprint: str, plugin_config: str | None = None) -> Path:
    """`inventory/` of the run: the group variables and the bringup_state plugin's config (by default the
    run's own site and state database)."""
    inventory = run_dir / "inventory"
    all_vars = inventory / "group_vars" / "all"
    all_vars.mkdir(parents=True, exist_ok=True)
    (inventory / "host_vars").mkdir(exist_ok=True)
    site_vars = REPO_ROOT / "inventory" / "group_vars" / "all.yml"
    link = all_vars / "00-site.yml"
    if site_vars.exists() and not link.is_symlink():
        link.symlink_to(site_vars)
    (all_vars / "50-testhosts.yml").write_text(
        "# Generated by sim.testhosts: the stand-in repository and the chroot switches.\n"
        + yaml.safe_dump(_group_vars(run_dir, url, fingerprint), sort_keys=True))
    key = run_dir / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    config = inventory / "testhosts.bringup_state.yml"
    if plugin_config is None:
        db = _site_paths(run_dir).default_state_db.relative_to(run_dir.resolve())
        plugin_config = f"plugin: bringup_state\nsite: ../site.yml\ndb: ../{db.as_posix()}\n"
    config.write_text(plugin_config)
    return config


def _mark_deployed(db: Path, site: Path, names: list[str]) -> None:
    from provision.site import load_site

    loaded = load_site(site)
    with StateStore(db) as store:
        store.sync_site((h.hostname, h.rack) for h in loaded.hosts())
        for name in names:
            if store.get(name).state is State.declared:
                store.mark(name, State.deployed, reason="debootstrap test host, as MAAS would leave it",
                           command="sim.testhosts up")


def distro_source(url: str, repo_key: str) -> dict[str, str]:
    """The files that point a host's apt at the stand-in repository's distribution part."""
    return {
        "/etc/apt/keyrings/bringup-testhost-distro.asc": repo_key,
        "/etc/apt/sources.list.d/testhost-distro.sources":
            "# bringup test host: what the distribution archive would provide\n"
            f"Types: deb\nURIs: {url}/distro/\nSuites: ./\n"
            "Signed-By: /etc/apt/keyrings/bringup-testhost-distro.asc\n",
    }


def _site_paths(run_dir: Path) -> SitePaths:
    """The paths of the site `write_site` leaves in `run_dir` (its state database is the inventory's)."""
    return SitePaths.of(run_dir / "site.yml", SITE_NAME)


def claim(run_dir: Path, *, detached: bool = False) -> None:
    """Make `run_dir` this process's: refuse it while its hosts' starter lives (or they were started detached),
    end what a dead starter left (hosts, mounts, the repository server), and unless `detached`, bind what this
    process starts to its life."""
    if (run_dir / STATE_FILE).exists():
        try:
            pid, started = (int(v) for v in (run_dir / OWNER_FILE).read_text().split())
            alive = lifetime.start_time(pid) == started
        except (OSError, ValueError):  # detached, or from before owners were recorded: stopped by `down` only
            alive = True
        if alive:
            raise TestHostError(f"{run_dir} already has running test hosts: `down` first")
        if problems := down(run_dir):
            raise TestHostError(f"{run_dir}: a previous run's test hosts could not be stopped: {'; '.join(problems)}")
    run_dir.mkdir(parents=True, exist_ok=True)
    owner = DETACHED if detached else f"{os.getpid()} {lifetime.start_time(os.getpid())}"
    (run_dir / OWNER_FILE).write_text(owner + "\n")
    if not detached:
        lifetime.bind_children()


def up(run_dir: Path, count: int = 4, *, log: bool = True, detached: bool = False) -> Lab:
    """Build (or reuse) the base and repository, start `count` hosts; on any error stop what started.
    `detached`: they outlive this process (until `down`)."""
    run_dir = run_dir.resolve()
    claim(run_dir, detached=detached)
    for directory in (run_dir / "ssh", _site_paths(run_dir).state_dir, run_dir / "hosts"):
        directory.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=2) as pool:
        base_job = pool.submit(base_fs.ensure_base, log=log)
        repo_job = pool.submit(repo_mod.build, log=log)
        base = base_job.result()
        repo = repo_job.result()
    key = run_dir / "ssh" / "id_ed25519"
    if not key.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bringup-testhosts", "-f", str(key)])
    site, names = write_site(run_dir, count)
    hosts = tuple(th.TestHost(name, lab_host_address(i + 1), run_dir / "hosts" / name) for i, name in enumerate(names))
    state: dict[str, Any] = {"hosts": [{"name": h.name, "address": h.address, "directory": str(h.directory)}
                                       for h in hosts]}
    (run_dir / STATE_FILE).write_text(json.dumps(state, indent=2))
    try:
        server_pid, port = serve_repository(repo.root, run_dir)
        state["server_pid"] = server_pid
        (run_dir / STATE_FILE).write_text(json.dumps(state, indent=2))
        url = f"http://{REPO_ADDRESS}:{port}"
        extra = distro_source(url, repo.key_path.read_text())
        authorized = (run_dir / "ssh" / "id_ed25519.pub").read_text()
        with ThreadPoolExecutor(max_workers=8) as pool:
            host_keys = list(pool.map(lambda h: th.start(h, base, authorized, extra), hosts))
        (run_dir / "ssh" / "known_hosts").write_text(
            "".join(f"{h.address} {' '.join(k.split()[:2])}\n" for h, k in zip(hosts, host_keys, strict=True)))
        write_inventory(run_dir, url, repo.fingerprint)
        _mark_deployed(_site_paths(run_dir).default_state_db, site, names)
    except BaseException:
        down(run_dir)
        raise
    return Lab(run_dir=run_dir, hosts=hosts, repo_url=url, fingerprint=repo.fingerprint)


def down(run_dir: Path, *, remove: bool = True) -> list[str]:
    """Stop every host and the repository server of the run; returns problems (empty when clean)."""
    run_dir = run_dir.resolve()
    state_path = run_dir / STATE_FILE
    state: dict[str, Any] = json.loads(state_path.read_text()) if state_path.exists() else {}
    hosts = [th.TestHost(h["name"], h["address"], Path(h["directory"])) for h in state.get("hosts", [])]
    known = {h.directory for h in hosts}
    hosts_dir = run_dir / "hosts"
    if hosts_dir.is_dir():
        hosts += [th.TestHost(d.name, "", d) for d in sorted(hosts_dir.iterdir()) if d.is_dir() and d not in known]
    with ThreadPoolExecutor(max_workers=8) as pool:
        problems = [p for found in pool.map(th.stop, hosts) for p in found]
    if "server_pid" in state:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(state["server_pid"]), signal.SIGTERM)
    (run_dir / READY_FILE).unlink(missing_ok=True)
    (run_dir / OWNER_FILE).unlink(missing_ok=True)
    if not problems:
        if remove and hosts_dir.is_dir():
            shutil.rmtree(hosts_dir)
        state_path.unlink(missing_ok=True)
    return problems


class _Stop(Exception):
    """SIGTERM, SIGINT or SIGHUP reached the supervisor."""


def _raise_stop(signum: int, _frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


def serve(run_dir: Path, count: int) -> int:
    """Supervise a lab (the `sim up --with testhosts` service): see `supervise`."""
    return supervise(run_dir, lambda: up(run_dir, count, log=False))


def supervise(run_dir: Path, start: Callable[[], Lab]) -> int:
    """Start the hosts with `start`, mark the run ready, and on SIGTERM/SIGINT/SIGHUP stop everything it
    started before exiting. A signal during `start` interrupts it, and `start` stops what it had started."""
    previous = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    lab: Lab | None = None
    problems: list[str] = []
    try:
        lab = start()
        (lab.run_dir / READY_FILE).write_text(f"{os.getpid()}\n")
        print(f"{len(lab.hosts)} test hosts up; inventory {lab.inventory}", flush=True)
        while True:
            signal.pause()
    except _Stop as stop:
        print(f"{stop}: stopping the test hosts", flush=True)
    finally:
        for sig in previous:  # a second signal must not interrupt the clean-up
            signal.signal(sig, signal.SIG_IGN)
        if lab is not None:
            # $BRINGUP_SIM_KEEP_HOST_FILES: the hosts' own files stay for a look afterwards (their upper layers).
            problems = down(run_dir, remove=not os.environ.get(ENV_KEEP_FILES))
        for problem in problems:
            print(problem, file=sys.stderr, flush=True)
    return 1 if problems else 0


def load(run_dir: Path) -> Lab:
    """The running lab of `run_dir` (after `up`)."""
    run_dir = run_dir.resolve()
    state = json.loads((run_dir / STATE_FILE).read_text())
    hosts = tuple(th.TestHost(h["name"], h["address"], Path(h["directory"])) for h in state["hosts"])
    group_vars = yaml.safe_load((run_dir / "inventory/group_vars/all/50-testhosts.yml").read_text())
    url = str(group_vars["nvidia_driver_repo_url"]).removesuffix("/cuda/")
    return Lab(run_dir, hosts, url, str(group_vars["nvidia_driver_repo_key_fingerprint"]))
