"""No process a lab starts outlives the process that started it, however that one dies (sim/lifetime.py).

Each test runs a starter in a child process, SIGKILLs it once its lab is up, and looks for what is left. The
starter is a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so every process its lab made, daemons that left
their parent included, is found among its descendants before the kill; nothing else is looked at or killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sim import lifetime
from sim.lifetime import descendants
from tests.processes import alive, still_running

REPO = Path(__file__).resolve().parents[2]
GONE_WITHIN_S = 20.0  # the watchdog's SIGTERM grace (sim/lifetime.py GRACE_S, 10 s) and a loaded machine

PRELUDE = """\
import ctypes, json, os, subprocess, sys, time
from pathlib import Path
ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: what the lab makes stays below this process
d = Path(sys.argv[1])
def ready(**more):
    from sim import lifetime
    print(json.dumps({"watchdog": lifetime.watchdog_pid(), **more}), flush=True)
    time.sleep(600)
"""

# The daemons are declared dependencies (deps/apt/slurm.txt): one missing fails the test (tests/conftest.py);
# only not being root (the lab's daemons run as root) skips it.
needs_slurm = pytest.mark.tools("slurmctld", "slurmd", "munged", "sinfo")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the lab's Slurm daemons run as root, and mounting does")


def _answers(address: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((address, port), timeout=0.5):
        return True
    return False


@contextlib.contextmanager
def _starter(tmp_path: Path, body: str, timeout_s: float = 120.0) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    """A starter running PRELUDE + `body` (which calls ready(...) once its lab is up): (process, what it said).
    Whatever of it is still there on the way out is killed (a failing test leaves nothing either)."""
    script = PRELUDE + textwrap.dedent(body)
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    started: dict[int, int] = {}
    try:
        readable, _, _ = select.select([proc.stdout], [], [], timeout_s)
        line = proc.stdout.readline() if readable else ""
        started = descendants(proc.pid)
        if not line:
            proc.kill()
            pytest.fail(f"the starter did not bring its lab up (rc {proc.wait()})")
        yield proc, json.loads(line)
    finally:
        started.update(descendants(proc.pid))
        proc.kill()
        proc.wait()
        for pid in still_running(started):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _until_below(root: int, programs: tuple[str, ...], within_s: float = 120.0) -> dict[int, int]:
    """{pid: start time} of `root`'s descendants once every one of `programs` runs among them. A submitted job is
    started by slurmctld, then slurmd, then the slurmstepd it forks (squeue's R comes before the last two), so
    its processes are waited for, not looked for at once (looked at every 50 ms; the bound is a loaded machine's)."""
    deadline = time.monotonic() + within_s
    while True:
        watched = descendants(root)
        running = " ".join(still_running(watched).values())
        missing = [p for p in programs if p not in running]
        if not missing:
            return watched
        if time.monotonic() > deadline:
            pytest.fail(f"not running below the starter within {within_s:.0f} s: {missing}; running: {running}")
        time.sleep(0.05)


def _kill_and_wait(proc: subprocess.Popen[str], watched: dict[int, int]) -> float:
    """SIGKILL the starter; seconds until every watched process was gone (fails past GONE_WITHIN_S)."""
    killed = time.monotonic()
    proc.kill()
    proc.wait()
    while still_running(watched) and time.monotonic() - killed < GONE_WITHIN_S:
        time.sleep(0.05)
    left = still_running(watched)
    assert not left, f"outlived their SIGKILLed starter: {left}"
    return time.monotonic() - killed


def test_a_daemon_a_lab_service_forks_off_dies_with_the_killed_starter(tmp_path: Path) -> None:
    """The service double-forks into a session of its own, re-parented away from it: no process group or
    parent link leads from the lab to it."""
    body = """
    from sim.lab import Lab, Service
    code = f'''
    import os, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            open({str(d / "daemon.part")!r}, "w").write(str(os.getpid()))
            os.rename({str(d / "daemon.part")!r}, {str(d / "daemon.pid")!r})
            time.sleep(600)
        os._exit(0)
    time.sleep(600)
    '''
    import textwrap
    svc = Service("forker", [sys.executable, "-c", textwrap.dedent(code)], probe=lambda: (d / "daemon.pid").exists(),
                  start_timeout_s=30)
    Lab([svc], d / "run").up()
    ready()
    """
    with _starter(tmp_path, body) as (proc, said):
        daemon = int((tmp_path / "daemon.pid").read_text())
        watched = descendants(proc.pid)
        assert daemon in watched and said["watchdog"] in watched
        assert os.getsid(daemon) != os.getsid(int((tmp_path / "run" / "forker.pid").read_text()))
        _kill_and_wait(proc, watched)


# One controller with a BMC, also the one Slurm node (JSON is YAML).
SITE = json.dumps({
    "name": "lifetime", "description": "a BMC and a Slurm node for the lab's lifetime tests",
    "credentials": {"bmc-default": {"username": "root", "password": {"env": "BRINGUP_SIM_BMC_PASSWORD"}}},
    "host_classes": {"controller": {"description": "head node", "pxe_nic": "NIC.Integrated.1-1-1"}},
    "racks": [{"name": "r9", "hosts": [{"hostname": "ctl-r9-01", "u": 2, "role": "controller", "class": "controller",
                                        "bmc": {"address": "127.0.31.250", "port": 8443,
                                                "credential": "bmc-default"}}]}],
    "slurm": {"cluster_name": "lifetime", "controller": "ctl-r9-01",
              "partitions": [{"name": "all", "classes": ["controller"], "default": True}]},
})


@needs_slurm
@needs_root
def test_sim_up_run_by_a_killed_starter_leaves_no_bmc_or_slurm_daemon(tmp_path: Path) -> None:
    """`sim up` itself leaves its services running (until `sim down`); run by a process that binds what it
    starts (a test, a demo), they die with that process: the BMC simulator, munged, slurmctld, slurmd, and a
    running job's slurmstepd (double-forked by slurmd, its environment overwritten by its process title)."""
    (tmp_path / "site.yml").write_text(SITE)
    body = """
    from sim import lifetime
    lifetime.bind_children()
    up = subprocess.run([sys.executable, "-m", "sim", "up", "--site", str(d / "site.yml")], capture_output=True,
                        text=True, timeout=300)
    if up.returncode != 0:
        sys.exit(up.stdout + up.stderr)
    env = {**os.environ, "SLURM_CONF": str(next(d.rglob("slurm.conf")))}
    # its output beside the lab, not in the caller's directory; the bound is sbatch's retries on a busy slurmctld
    subprocess.run(["sbatch", "--output", str(d / "job.out"), "--wrap", "sleep 600"], env=env, check=True,
                   capture_output=True, timeout=120)
    ready()
    """
    with _starter(tmp_path, body, timeout_s=300) as (proc, said):
        watched = _until_below(proc.pid, ("sim.redfish", "munged", "slurmctld", "slurmd", "slurmstepd", "sleep 600"))
        assert _answers("127.0.31.250", 8443) and _answers("127.0.2.40", 6817)
        _kill_and_wait(proc, watched)
        assert said["watchdog"] in watched
    assert not _answers("127.0.31.250", 8443) and not _answers("127.0.2.40", 6817)


@needs_slurm
@needs_root
def test_a_slurm_start_ends_the_daemons_a_killed_run_left_in_its_directory(tmp_path: Path) -> None:
    """With its watchdog killed too, a run's daemons stay: the next start in the same directory ends them (their
    pid files) instead of failing on slurmctld's busy port."""
    from sim.slurm.lab import Partition, SlurmLab, SlurmLabSpec

    spec = SlurmLabSpec("lifetime", ("n1",), (Partition("all", ("n1",), True),))
    body = """
    from sim.slurm.lab import Partition, SlurmLab, SlurmLabSpec
    SlurmLab(d / "slurm", SlurmLabSpec("lifetime", ("n1",), (Partition("all", ("n1",), True),))).start(nodes=[])
    ready()
    """
    with _starter(tmp_path, body) as (proc, said):
        watched = {pid: t for pid, t in descendants(proc.pid).items() if pid != said["watchdog"]}
        os.kill(said["watchdog"], signal.SIGKILL)
        proc.kill()
        proc.wait()
        time.sleep(0.2)
        left = " ".join(still_running(watched).values())
        assert "munged" in left and "slurmctld" in left, "the scenario: a killed run left its daemons"
        lab = SlurmLab(tmp_path / "slurm", spec)
        try:
            lab.start(nodes=[])
            assert not still_running(watched)
        finally:
            lab.stop()


def test_the_watchdog_ends_with_its_starter_when_nothing_is_left(tmp_path: Path) -> None:
    """A starter that stopped its lab and exits: its watchdog finds nothing to end and exits too."""
    body = """
    from sim import lifetime
    lifetime.bind_children()
    print(json.dumps({"watchdog": lifetime.watchdog_pid()}), flush=True)
    time.sleep(0.5)
    """
    with _starter(tmp_path, body) as (proc, said):
        watchdog = {said["watchdog"]: lifetime.start_time(said["watchdog"]) or 0}
        assert proc.wait(timeout=30) == 0
        deadline = time.monotonic() + 5
        while still_running(watchdog) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not still_running(watchdog)


def _gone_within(check: Callable[[], object], within_s: float) -> bool:
    """Whether `check()` turns falsy within `within_s` (looked at every 50 ms)."""
    deadline = time.monotonic() + within_s
    while check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_test_host_sshd_and_mounts_end_with_the_killed_starter(tmp_path: Path) -> None:
    """`sshd -D` in a chroot, started from a thread pool as the test hosts' `up` does (a parent-death signal
    would fire when that thread ends): it and its sessions end with the starter, and the watchdog then unmounts
    what the starter mounted and recorded: the host's overlay root, /proc, /dev, /dev/pts, /run, and the replay's
    bind mount over /proc/swaps (sim/testhosts/replay.py), none of it left under the run's directory."""
    from sim.addresses import lab_host_address
    from sim.testhosts import hosts as th
    from tests.ansible.conftest import require_test_host_prerequisites

    require_test_host_prerequisites()
    address = lab_host_address(250)  # far from the test-host modules' own (100-160) and the lab's (1-16)
    host = th.TestHost("lifetime-01", address, tmp_path / "host")
    replay_set = tmp_path / "set"
    replay_set.mkdir()
    (replay_set / "proc-swaps.out").write_text("# proc-swaps rc=0\nFilename Type Size Used Priority\n")
    body = f"""
    from concurrent.futures import ThreadPoolExecutor
    from sim import lifetime
    from sim.testhosts import base, hosts as th, lab, replay
    host = th.TestHost("lifetime-01", {address!r}, d / "host")
    lab.claim(d / "run")  # what the test hosts' `up` does first: binds the hosts to this process
    prepare = lambda h: replay.install(h.root, d / "set", {{}})
    with ThreadPoolExecutor(1) as pool:
        pool.submit(th.start, host, base.ensure_base(log=False), "ssh-ed25519 AAAA lifetime", {{}}, prepare).result()
    ready(token=lifetime.token())
    """
    try:
        with _starter(tmp_path, body) as (proc, said):
            watched = descendants(proc.pid)
            assert "sshd" in " ".join(still_running(watched).values()) and _answers(address, 22)
            record = lifetime.MOUNTS_DIR / f"{said['token']}.mounts"
            mounted = lifetime.mounted_below(tmp_path)
            assert len(mounted) == 6 and str(host.root / "proc/swaps") in mounted, "the scenario: the host's mounts"
            assert set(mounted) <= {json.loads(line) for line in record.read_text().splitlines()}
            _kill_and_wait(proc, watched)
            assert _gone_within(lambda: lifetime.mounted_below(tmp_path), GONE_WITHIN_S), \
                f"outlived their SIGKILLed starter: {lifetime.mounted_below(tmp_path)}"
            assert _gone_within(record.exists, 5.0)
        assert not _answers(address, 22)
    finally:
        assert th.stop(host) == []


@needs_root
def test_a_watchdog_unmounts_only_what_its_record_names_is_mounted_and_no_other_record_claims(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A point recorded but never mounted (its starter died between the two) is skipped; a point a later starter
    recorded too (a new run in the same directory) is that starter's: the dead one's watchdog leaves it."""
    mine, theirs = f"test-{os.getpid()}-a", f"test-{os.getpid()}-b"
    points = {name: tmp_path / name for name in ("mounted", "never", "shared")}
    for point in points.values():
        point.mkdir()
    monkeypatch.setenv(lifetime.ENV, mine)
    for point in points.values():
        lifetime.will_mount(point)
    for name in ("mounted", "shared"):
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(points[name])], check=True)
    monkeypatch.setenv(lifetime.ENV, f"{mine}:{theirs}")  # the nearest starter's record: the last token's
    lifetime.will_mount(points["shared"])
    try:
        assert lifetime.unmount_recorded(mine) == [str(points["mounted"])]
        assert lifetime.mounted_below(tmp_path) == [str(points["shared"])]
        assert not (lifetime.MOUNTS_DIR / f"{mine}.mounts").exists()
    finally:
        for point in lifetime.mounted_below(tmp_path):
            subprocess.run(["umount", "-l", point], check=False)
        lifetime.unmounted([str(p) for p in points.values()])  # a clean stop: out of every record, emptied ones gone
    assert not (lifetime.MOUNTS_DIR / f"{mine}.mounts").exists()
    assert not (lifetime.MOUNTS_DIR / f"{theirs}.mounts").exists()


def test_a_test_host_up_ends_what_a_killed_run_left_in_its_directory(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """With its watchdog killed too, a run's sshd and repository server stay, and its mounts: the next `up` in
    the same directory finds its starter dead (the run's owner file) and stops them instead of refusing."""
    from sim import addresses
    from sim.testhosts import lab as lab_mod
    from tests.ansible.conftest import require_test_host_prerequisites

    require_test_host_prerequisites()
    offset = 249  # one host at 127.0.1.250, as the sshd test
    body = f"""
    from sim import addresses
    from sim.testhosts import lab
    lab.lab_host_address = lambda n: addresses.lab_host_address(n + {offset})
    lab.up(d / "run", 1, log=False)
    ready()
    """
    monkeypatch.setattr(lab_mod, "lab_host_address", lambda n: addresses.lab_host_address(n + offset))
    try:
        with _starter(tmp_path, body) as (proc, said):
            watched = {pid: t for pid, t in descendants(proc.pid).items() if pid != said["watchdog"]}
            os.kill(said["watchdog"], signal.SIGKILL)
            proc.kill()
            proc.wait()
            left = " ".join(still_running(watched).values())
            assert "sshd" in left and "http.server" in left, "the scenario: a killed run left its processes"
            again = lab_mod.up(tmp_path / "run", 1, log=False)
            assert not still_running(watched)
            assert _answers(again.hosts[0].address, 22)
    finally:
        assert lab_mod.down(tmp_path / "run") == []


def test_a_process_whose_name_holds_spaces_and_parentheses_is_read_by_the_fields_after_its_name(
        tmp_path: Path) -> None:
    """/proc/<pid>/stat's second field is the command name in parentheses, as the program was named: "x) Z 1 (y"
    read with a plain split() would be a zombie whose parent is pid 1. sim/lifetime.py parses after the last ')'."""
    odd = tmp_path / "x) Z 1 (y"
    odd.symlink_to("/bin/sleep")  # the kernel names the process after the path it ran: the link's name
    child = subprocess.Popen([str(odd), "30"])
    try:
        deadline = time.monotonic() + 10
        while "x) Z 1 (y" not in Path(f"/proc/{child.pid}/stat").read_text() and time.monotonic() < deadline:
            time.sleep(0.01)  # between fork and exec the child still bears this process's name
        assert Path(f"/proc/{child.pid}/stat").read_text().startswith(f"{child.pid} (x) Z 1 (y) ")
        assert alive(child.pid)
        assert child.pid in descendants(os.getpid())  # its parent read as this process, not as the "1" in its name
        assert still_running({child.pid: lifetime.start_time(child.pid) or 0}) == {child.pid: f"{odd} 30"}
    finally:
        child.kill()
        child.wait()
    assert not alive(child.pid)
