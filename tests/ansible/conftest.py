"""Shared fixtures: four Debian test hosts (sim.testhosts) and a runner for site.yml against them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import testinfra  # type: ignore[import-untyped]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TEST_HOSTS = 4


def require_test_host_prerequisites() -> None:
    """Test hosts need root (mounts, chroot): without it the tests skip, saying so. The programs they use are
    declared dependencies (deps/apt/ansible.txt, deps/python/ansible.txt) that `./bringup test` installs: one
    missing is a broken install, so the test fails naming it rather than skipping."""
    if os.geteuid() != 0:
        pytest.skip("test hosts need root (mounts, chroot)")
    for tool in ("debootstrap", "equivs-build", "unshare", "ssh", "objcopy", "gpg"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (deps/apt/ansible.txt)")
    if not (BIN / "ansible-playbook").exists():
        pytest.fail("ansible is not installed in the venv (deps/python/ansible.txt)")


def start_own_test_hosts(run_dir: Path, count: int, address_offset: int) -> object:
    """`count` test hosts of a module's own at 127.0.1.(offset+1)...: not the package lab's, so the module needs no
    place in the lab's xdist group (the Lab; the caller stops it with sim.testhosts.lab.down)."""
    require_test_host_prerequisites()
    from sim import addresses
    from sim.testhosts import lab as lab_mod

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lab_mod, "lab_host_address", lambda n: addresses.lab_host_address(n + address_offset))
        return lab_mod.up(run_dir, count, log=False)


@dataclass(frozen=True)
class PlaybookRun:
    rc: int
    output: str
    recap: dict[str, dict[str, int]]


_RECAP = re.compile(r"^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$", re.MULTILINE)


def parse_recap(output: str) -> dict[str, dict[str, int]]:
    tail = output.rsplit("PLAY RECAP", 1)[-1]
    recap: dict[str, dict[str, int]] = {}
    for host, counters in _RECAP.findall(tail):
        recap[host] = {k: int(v) for k, v in (pair.split("=") for pair in counters.split())}
    return recap


def run_playbook(inventory: Path, playbook: Path, *extra: str, timeout: float = 900) -> PlaybookRun:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0",
           "ANSIBLE_NOCOLOR": "1", "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    done = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(playbook), *extra],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    output = done.stdout + done.stderr
    return PlaybookRun(done.returncode, output, parse_recap(output))


_masters: list[Path] = []  # the folder of this process's SSH master connections (testinfra's commands), once made


def _master_folder() -> Path:
    """testinfra's SSH backend starts one `ssh` per command: with a master connection per host (ControlMaster, in
    a short folder of its own: a socket path must stay under 108 bytes) each command is a new session over it
    instead of a new login (the end-state checks went from about 45 s per host to seconds). Made on first use and
    ended when the session ends (`pytest_sessionfinish`), not by a package fixture: an autouse fixture of the
    package would put every test of it in one xdist group (tests/xdist_workers.py), lint and all, one worker's
    work for the whole run."""
    if not _masters:
        _masters.append(Path(tempfile.mkdtemp(prefix="bringup-ti-")))
    return _masters[0]


def ssh(lab: Any, name: str) -> Any:
    """testinfra over SSH to a test host, through its master connection."""
    host = lab.host(name)
    return testinfra.get_host(
        f"ssh://root@{host.address}", ssh_identity_file=str(lab.ssh_key),
        ssh_extra_args=f"-o UserKnownHostsFile={lab.run_dir / 'ssh' / 'known_hosts'} -o StrictHostKeyChecking=yes "
                       f"-o ControlMaster=auto -o ControlPath={_master_folder()}/%C -o ControlPersist=60")


def enabled(host: Any, unit: str) -> bool:
    # testinfra sees no running systemd in a chroot and would check SysV links: ask systemctl itself.
    return bool(host.run(f"systemctl is-enabled {unit}").stdout.strip() == "enabled")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Every SSH master this process started is stopped, and its folder removed."""
    while _masters:
        folder = _masters.pop()
        for socket in folder.iterdir():
            subprocess.run(["ssh", "-o", f"ControlPath={socket}", "-O", "exit", "bringup-test-host"],
                           capture_output=True, timeout=10, check=False)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="package")
def test_host_addresses() -> None:
    """The loopback addresses of the test hosts (127.0.1.N), held by the package's `lab` and by the tests that
    start test hosts of their own: sharing this fixture puts them in one xdist group, so they never run on one
    worker's loopback while the other's hosts are up (and the order below keeps those tests first)."""


@pytest.fixture(scope="package")
def lab(tmp_path_factory: pytest.TempPathFactory, test_host_addresses: None) -> Iterator[object]:
    require_test_host_prerequisites()
    from sim.testhosts import lab as lab_mod

    run_dir = tmp_path_factory.mktemp("testhosts")
    started = lab_mod.up(run_dir, TEST_HOSTS, log=False)
    try:
        yield started
    finally:
        problems = lab_mod.down(run_dir)
        assert problems == [], problems


def state_of(lab: object, host: str) -> tuple[str, str | None]:
    from provision.state import StateStore

    with StateStore(lab.state_db) as store:  # type: ignore[attr-defined]
        record = store.get(host)
        return record.state.value, record.reason


def read_json(text: str) -> object:
    return json.loads(text)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """tests/ansible/test_sim_with_testhosts.py starts test hosts of its own on the loopback addresses the
    package's `lab` uses (127.0.1.N), so it runs before any test that brings the package's lab up."""
    own = [i for i in items if i.path.name == "test_sim_with_testhosts.py"]
    if own:
        rest = [i for i in items if i.path.name != "test_sim_with_testhosts.py"]
        first = next((n for n, i in enumerate(rest) if "tests/ansible/" in str(i.path)), len(rest))
        items[:] = rest[:first] + own + rest[first:]
