"""`python -m sim up --with testhosts=N` starts the Debian test hosts as a lab service, `sim down` stops
them, and nothing of them is left: no process rooted in a host, no mount, no pid file. The default
`sim up` does not start them (it stays fast for the demo)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ansible.conftest import REPO, require_test_host_prerequisites

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("test_host_addresses")]

# One host and its BMC at the far end of the BMC range, so the site's Redfish simulator stays small.
SITE = """\
name: withtesthosts
description: one controller, for sim up --with testhosts
credentials:
  bmc-default:
    username: root
    password: {env: BRINGUP_SIM_BMC_PASSWORD}
host_classes:
  controller:
    description: head node
    pxe_nic: NIC.Integrated.1-1-1
racks:
  - name: r9
    hosts:
      - {hostname: ctl-r9-01, u: 2, role: controller, class: controller,
         bmc: {address: 127.0.31.250, port: 8443, credential: bmc-default}}
"""


def _sim(*args: str, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sim", *args, "--site", str(site)], cwd=REPO,
                          env=dict(os.environ), capture_output=True, text=True, timeout=900, check=False)


def _answers(address: str) -> bool:
    try:
        with socket.create_connection((address, 22), timeout=1):
            return True
    except OSError:
        return False


def _rooted_in(directory: Path) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.readlink(f"/proc/{entry}/root").startswith(str(directory)):
                found.append(int(entry))
        except OSError:
            continue
    return found


def _mounts_under(directory: Path) -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        return [line.split()[4] for line in handle if line.split()[4].startswith(str(directory))]


@pytest.fixture
def site(tmp_path: Path) -> Path:
    require_test_host_prerequisites()
    path = tmp_path / "site.yml"
    path.write_text(SITE)
    return path


def test_sim_up_without_with_starts_no_test_hosts(site: Path) -> None:
    try:
        up = _sim("up", "--json", site=site)
        assert up.returncode == 0, up.stderr
        assert "testhosts" not in json.loads(up.stdout)
        assert not (site.parent / "state" / "lab" / "testhosts").exists()
    finally:
        assert _sim("down", site=site).returncode == 0


def test_unknown_optional_service_is_refused_and_starts_nothing(site: Path) -> None:
    up = _sim("up", "--with", "nope", site=site)
    assert up.returncode == 1 and "no such optional service" in up.stderr and "testhosts" in up.stderr
    assert not list((site.parent / "state" / "lab").glob("*.pid"))


def test_sim_up_with_testhosts_serves_them_and_sim_down_leaves_nothing(site: Path) -> None:
    run_dir = site.parent / "state" / "lab" / "testhosts"
    try:
        up = _sim("up", "--with", "testhosts=2", "--json", site=site)
        assert up.returncode == 0, up.stdout + up.stderr
        status = json.loads(up.stdout)
        assert status["testhosts"]["healthy"] is True
        assert _answers("127.0.1.1") and _answers("127.0.1.2")
        inventory = run_dir / "inventory" / "testhosts.bringup_state.yml"
        assert inventory.exists()
        env = _sim("env", site=site)
        assert f"export BRINGUP_TESTHOSTS_INVENTORY='{inventory}'" in env.stdout
        assert _rooted_in(run_dir / "hosts"), "each host's sshd runs chrooted in its directory"
    finally:
        down = _sim("down", site=site)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "testhosts" in down.stdout
    assert _rooted_in(run_dir) == [] and _mounts_under(run_dir) == []
    assert not _answers("127.0.1.1")
    assert not list((site.parent / "state" / "lab").glob("*.pid"))


def test_sim_down_stops_hosts_whose_supervisor_was_killed(site: Path) -> None:
    run_dir = site.parent / "state" / "lab" / "testhosts"
    try:
        up = _sim("up", "--with", "testhosts=1", site=site)
        assert up.returncode == 0, up.stdout + up.stderr
        supervisor = int((site.parent / "state" / "lab" / "testhosts.pid").read_text())
        assert _mounts_under(run_dir), "the scenario: the supervisor's host is mounted"
        os.kill(supervisor, signal.SIGKILL)  # no chance to stop its hosts or unmount them: its watchdog does
        deadline = time.monotonic() + 15
        while (_answers("127.0.1.1") or _mounts_under(run_dir)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _answers("127.0.1.1"), "the host's sshd outlived its supervisor (sim/lifetime.py)"
        assert _mounts_under(run_dir) == [], "the host's mounts outlived its supervisor (sim/lifetime.py)"
    finally:
        down = _sim("down", site=site)
    assert down.returncode == 0, down.stdout + down.stderr
    assert _rooted_in(run_dir) == [] and _mounts_under(run_dir) == []
    assert not _answers("127.0.1.1")
