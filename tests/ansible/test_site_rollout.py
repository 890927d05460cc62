"""Fleet rollout on the test hosts over real SSH: the controller's apt cache (Debian's apt-cacher-ng, configured by
playbooks/controller.yml's apt_cache role and run for real on loopback) that the hosts fetch through (apt_proxy,
the site's rollout.apt_proxy), and a driver rollout in batches (rollout.batches, max_fail_percentage) that stops
after a first batch with a failed host.

Runs after test_site_playbook.py on the same lab (file order): gpu-r1-03 is down by then, gpu-r1-02 holds an older
driver by hand, gpu-r1-01 has a disk fault, gpu-r1-04 is configured.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.testhosts import faults
from tests.ansible.conftest import REPO, run_playbook, ssh, state_of
from tests.ansible.test_site_playbook import SITE

pytestmark = [pytest.mark.slow, pytest.mark.tools("apt-cacher-ng")]

CACHE_ADDRESS = "127.0.2.31"  # lab services range (sim/addresses.py), beside the stand-in repository's 127.0.2.30
CACHE_PORT = 3142
# apt-cacher-ng 3.7.4 (Debian 12) answers "503 Connection refused" for every source on a port above 32767 (found
# here: 32767 fetched, 32768 never reached), and the lab serves its repository on an ephemeral port: the test
# serves the same repository on a low port too and points the hosts' sources there.
REPO_PORT = 8080
PROXY = f"http://{CACHE_ADDRESS}:{CACHE_PORT}"
DRIVER_NAMES = ("nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-smi", "nvidia-persistenced")


def _last_event_id(lab: Any, host: str) -> int:
    from provision.state import StateStore

    with StateStore(lab.state_db) as store:
        return int(store.history(host)[-1].id)


@pytest.fixture
def rollout_site(lab: Any) -> Iterator[None]:
    """The lab's site with a rollout section: the apt cache, batches of two hosts, no failure tolerated."""
    original = lab.site_file.read_text()
    doc = yaml.safe_load(original)
    doc["rollout"] = {"apt_proxy": PROXY, "batches": [2], "max_fail_percentage": 0, "forks": 8}
    lab.site_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    try:
        yield
    finally:
        lab.site_file.write_text(original)


def _start(argv: list[str], log: Path, address: str, port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return process
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                os.killpg(process.pid, signal.SIGKILL)
                raise AssertionError(f"{argv[0]} did not listen on {address}:{port}: {log.read_text()[-2000:]}") from None
            time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=10)


@pytest.fixture
def low_port_repository(lab: Any, tmp_path: Path) -> Iterator[str]:
    """The lab's stand-in repository also on REPO_PORT, and the hosts' sources (the roles' repository variables
    and the distribution source in each host) pointed there; everything put back afterwards."""
    from sim.testhosts import repo as repo_mod

    url = f"{lab.repo_url.rsplit(':', 1)[0]}:{REPO_PORT}"
    # HTTP/1.1 (keep-alive): behind HTTP/1.0's close after every answer, apt-cacher-ng once reused a connection the
    # server had just closed and answered a host 503 "Connection closed" for a package (a CI-like run, 2026-12-02).
    server = _start([sys.executable, "-m", "http.server", "-p", "HTTP/1.1", str(REPO_PORT), "--bind",
                     url[7:].split(":")[0],
                     "--directory", str(repo_mod.build(log=False).root)], tmp_path / "repo.log",
                    url[7:].split(":")[0], REPO_PORT)
    sources: list[Path] = []
    originals: list[str] = []
    moved_file = lab.run_dir / "inventory" / "group_vars" / "all" / "60-low-port-repository.yml"
    try:
        all_vars = lab.run_dir / "inventory" / "group_vars" / "all"
        generated = yaml.safe_load((all_vars / "50-testhosts.yml").read_text())
        moved = {k: v.replace(lab.repo_url, url) for k, v in generated.items() if isinstance(v, str) and lab.repo_url in v}
        (all_vars / "60-low-port-repository.yml").write_text(yaml.safe_dump(moved))
        # every source a host already has (the distribution one and the vendors' the roles wrote; gpu-r1-03 is down)
        sources = [p for h in lab.hosts for p in (h.root / "etc/apt/sources.list.d").glob("*.sources")
                   if lab.repo_url in p.read_text()]
        originals = [p.read_text() for p in sources]
        for path, text in zip(sources, originals, strict=True):
            path.write_text(text.replace(lab.repo_url, url))
        yield url
    finally:
        for path, text in zip(sources, originals, strict=True):
            path.write_text(text)
        moved_file.unlink(missing_ok=True)
        _stop(server)


@pytest.fixture
def apt_cache(lab: Any, rollout_site: None, low_port_repository: str, tmp_path: Path) -> Iterator[Path]:
    """controller.yml's apt cache play on this machine (its directories under tmp_path, no service manager),
    then the real apt-cacher-ng started with the configuration the role wrote; yields its request log."""
    dirs = {name: tmp_path / name for name in ("conf", "cache", "log")}
    dirs["conf"].mkdir()
    extra = {"apt_cache_hosts": "localhost", "apt_cache_manage_services": False,
             "apt_cache_config_dir": str(dirs["conf"]), "apt_cache_cache_dir": str(dirs["cache"]),
             "apt_cache_log_dir": str(dirs["log"]), "apt_cache_allow_user_ports": [80, REPO_PORT],
             "ansible_python_interpreter": "/usr/bin/python3"}  # the apt module needs python3-apt
    run = run_playbook(lab.inventory, REPO / "playbooks" / "controller.yml", "-e", json.dumps(extra), timeout=300)
    assert run.rc == 0 and run.recap["localhost"]["failed"] == 0, run.output[-4000:]
    config = (dirs["conf"] / "zz_bringup.conf").read_text()
    assert f"BindAddress: {CACHE_ADDRESS}\n" in config and f"Port: {CACHE_PORT}\n" in config  # from the site
    daemon = _start(["/usr/sbin/apt-cacher-ng", "-c", str(dirs["conf"]), "ForeGround=1",
                     f"SocketPath={tmp_path / 'socket'}", f"PidFile={tmp_path / 'pid'}"], tmp_path / "acng.out",
                    CACHE_ADDRESS, CACHE_PORT)
    try:
        yield dirs["log"] / "apt-cacher.log"
    finally:
        _stop(daemon)


def _run_with_a_bad_driver_pin(lab: Any, log_name: str) -> Any:
    """site.yml with gpu-r1-01 pinned to a driver version the repository lacks (taken back after the run)."""
    pin = lab.run_dir / "inventory" / "host_vars" / "gpu-r1-01.yml"
    pin.write_text('nvidia_driver_version: "580.999.99-1"\n')
    try:
        run = run_playbook(lab.inventory, SITE)
        (lab.run_dir / log_name).write_text(run.output)
        return run
    finally:
        pin.unlink()


def test_a_driver_rollout_fetches_through_the_apt_cache_and_stops_after_a_failed_first_batch(
        lab: Any, apt_cache: Path, low_port_repository: str) -> None:
    # gpu-r1-02: its hand-held older driver released, so this run upgrades it (580.95.05 -> the site's version).
    # Its downloaded packages dropped (apt-get clean), so the upgrade downloads them again, through the cache.
    assert ssh(lab, "gpu-r1-02").run(f"apt-mark unhold {' '.join(DRIVER_NAMES)} && apt-get clean").rc == 0
    # gpu-r1-01: a bad driver pin, a version the repository lacks (its disk fault taken back); the host fails its
    # driver change (here refused before apt, as its driver is held at the site's version).
    untouched = _last_event_id(lab, "gpu-r1-04")
    run = _run_with_a_bad_driver_pin(lab, "rollout-run.log")
    assert run.rc != 0, run.output[-3000:]
    # Batch one (gpu-r1-01, gpu-r1-02): one failed, above max_fail_percentage 0, so batch two never started.
    said = " ".join(run.output.split())  # the callback wraps long messages
    assert "rollout stopped before the next batch: 1 of the 2 hosts of this batch failed (gpu-r1-01)" in said, \
        run.output[-6000:]
    assert set(run.recap) & {"gpu-r1-03", "gpu-r1-04"} == set(), run.recap
    assert _last_event_id(lab, "gpu-r1-04") == untouched
    assert state_of(lab, "gpu-r1-01")[0] == "failed" and "580.999.99-1" in said
    assert state_of(lab, "gpu-r1-02") == ("configured", None)
    assert ssh(lab, "gpu-r1-02").package("nvidia-driver-cuda").version == "580.159.04-1"
    # Both hosts of the batch point apt at the cache, and the cache's own log shows their requests: the package
    # indexes of the stand-in repository and the upgraded driver's packages, fetched from it through the cache.
    for name in ("gpu-r1-01", "gpu-r1-02"):
        assert ssh(lab, name).file("/etc/apt/apt.conf.d/01bringup-proxy").contains(f'^Acquire::http::Proxy "{PROXY}";$')
    served = [line.split("|") for line in apt_cache.read_text().splitlines() if "|O|" in line]
    repo = low_port_repository.removeprefix("http://").split(":")[0]  # apt-cacher-ng logs host/path, no port
    paths = [fields[4].replace("/./", "/") for fields in served]  # flat repositories: Suites ./, Filename ./x.deb
    assert any(p.startswith(f"{repo}/cuda/") and p.endswith(("Release", "Packages", "Packages.gz")) for p in paths)
    assert any(p.startswith(f"{repo}/cuda/nvidia-driver-cuda_580.159.04-1") for p in paths), paths


@pytest.fixture
def batches_of_two(lab: Any) -> Iterator[None]:
    """The lab's site with batches of two hosts and no failure tolerated, no apt cache."""
    original = lab.site_file.read_text()
    doc = yaml.safe_load(original)
    doc["rollout"] = {"batches": [2], "max_fail_percentage": 0, "forks": 8}
    lab.site_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    try:
        yield
    finally:
        lab.site_file.write_text(original)


def _lose_ssh_when_dpkg_starts(lab: Any, name: str) -> threading.Thread:
    """The host stops answering while dpkg runs (a hung or panicked host, a pulled cable): a dpkg hook holds its
    first package change, and the host's sshd and everything it started are killed once the hook has begun."""
    from sim.testhosts import hosts as th

    root = lab.host(name).root
    marker = root / "tmp/bringup-fault-dpkg-started"
    marker.unlink(missing_ok=True)
    (root / "etc/apt/apt.conf.d/99bringup-fault-hang").write_text(
        'DPkg::Pre-Invoke { "touch /tmp/bringup-fault-dpkg-started; sleep 300"; };\n')
    problems: list[str] = []

    def watch() -> None:
        deadline = time.monotonic() + 600
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        problems.extend(th.stop(lab.host(name)))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.problems = problems  # type: ignore[attr-defined]
    watcher.start()
    return watcher


def test_a_batch_whose_hosts_all_fail_or_stop_answering_is_recorded_and_stops_the_rollout(
        lab: Any, batches_of_two: None) -> None:
    # gpu-r1-01: the bad driver pin again. gpu-r1-02: DOCA-OFED removed by hand, so the ofed role installs it again,
    # and the host stops answering once dpkg starts (after the fact gathering: lost mid-run, not unreachable from
    # the start).
    faults.inject(lab, "gpu-r1-02", "ofed_removed")
    watcher = _lose_ssh_when_dpkg_starts(lab, "gpu-r1-02")
    untouched = _last_event_id(lab, "gpu-r1-04")
    run = _run_with_a_bad_driver_pin(lab, "all-failed-batch-run.log")
    watcher.join(timeout=30)
    assert not watcher.is_alive() and watcher.problems == [], watcher.problems  # type: ignore[attr-defined]
    assert run.rc != 0, run.output[-3000:]
    # Before, Ansible ended the playbook as soon as the whole batch was out, and nothing recorded or said so.
    said = " ".join(run.output.replace("''", "'").split())  # the callback's YAML quoting, unwrapped
    assert ("rollout stopped before the next batch: 2 of the 2 hosts of this batch failed (gpu-r1-01, gpu-r1-02; "
            "stopped answering: gpu-r1-02), above the site's rollout.max_fail_percentage 0") in said, run.output[-6000:]
    assert run.recap["gpu-r1-01"]["failed"] == 1 and run.recap["gpu-r1-02"]["unreachable"] == 1, run.recap
    assert set(run.recap) & {"gpu-r1-03", "gpu-r1-04"} == set(), run.recap
    assert _last_event_id(lab, "gpu-r1-04") == untouched
    assert state_of(lab, "gpu-r1-01")[0] == "failed" and "580.999.99-1" in said
    assert state_of(lab, "gpu-r1-02") == ("failed", "site_unreachable_over_ssh")
    from provision.state import StateStore

    with StateStore(lab.state_db) as store:
        event = store.history("gpu-r1-02")[-1]
    assert event.command == "site.yml" and event.evidence["message"] == "the host stopped answering over SSH during site.yml"
