"""A real Slurm 22.05 on loopback: one munged, one slurmctld and one slurmd per node, Debian's own binaries.

Debian 12 builds Slurm with multiple-slurmd support (REFERENCE-wave3 A5), so every node of the site runs as a
`slurmd -N <node>` of this machine, each on its own port of one loopback address, all sharing one munged with a
lab key. Nothing is systemd's: every daemon runs in the foreground (`-D`, `-F`) as a child in its own session,
and `stop()` ends each group. The daemons die with the process that started them, however it dies
(sim/lifetime.py), and a start ends what a previous run in the same directory left (its daemons' pid files).
The files live under the lab's run directory: `slurm.conf` (its path is what
clients need: `env()` gives `SLURM_CONF`), the key (0400), state, spool and logs.

glibc's getaddrinfo(AI_ADDRCONFIG), which Slurm uses, resolves no IPv4 address in a network namespace whose only
address is 127.0.0.1; `start()` says so instead of letting the daemons fail (tests/xdist_workers.py gives its
namespaces a second loopback address).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from provision.errors import BringupError
from sim import lifetime
from sim.addresses import check_loopback

CONTROLLER_ADDRESS = "127.0.2.40"  # slurmctld (services range of sim/addresses.py)
NODES_ADDRESS = "127.0.2.41"  # every slurmd, one port each
CONTROLLER_PORT = 6817
NODE_PORT_BASE = 17001


class SlurmLabError(BringupError):
    """The lab's Slurm could not be started or stopped."""


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: tuple[str, ...]
    default: bool = False


@dataclass(frozen=True)
class SlurmLabSpec:
    cluster: str
    nodes: tuple[str, ...]
    partitions: tuple[Partition, ...]
    cpus: int = 1
    real_memory_mb: int = 1000
    # Gres=gpu:N in the node lines. Leave 0 for nodes whose slurmd runs here: with no /dev/nvidia* the gpu plugin
    # reports 0 GPUs and slurmctld drains the node ("gres/gpu count reported lower than configured (0 < N)").
    gpus: int = 0
    slurmd_timeout_s: int = 10
    health_check_program: str | None = None
    health_check_interval_s: int = 0
    topology: str | None = None  # topology.conf text: TopologyPlugin=topology/tree when given
    extra: tuple[str, ...] = field(default_factory=tuple)  # more slurm.conf lines
    # AuthInfo cred_expire: how long a requeued job waits before it may start again (Slurm: 120 s by default,
    # at least 5; a smaller value is logged as invalid and the default used)
    cred_expire_s: int | None = None


def addrconfig_ok() -> bool:
    try:
        socket.getaddrinfo(CONTROLLER_ADDRESS, CONTROLLER_PORT, socket.AF_INET, socket.SOCK_STREAM, 0,
                           socket.AI_ADDRCONFIG)
    except socket.gaierror:
        return False
    return True


class SlurmLab:
    def __init__(self, run_dir: Path, spec: SlurmLabSpec) -> None:
        check_loopback(CONTROLLER_ADDRESS)
        check_loopback(NODES_ADDRESS)
        self.dir = run_dir
        self.spec = spec
        # Unix sockets (munged's, each job step's `<spool>/<node>_<job>.<step>`) must fit sun_path's 108 bytes: a
        # run directory under pytest-xdist's temporary folders does not ("Unix socket path ... is too long", the
        # batch launch fails). They live in a short folder of their own, named after the run directory.
        digest = hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:12]
        self.sockets = Path(tempfile.gettempdir()) / f"bringup-slurm-{digest}"
        self.conf = run_dir / "slurm.conf"
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    # files ---------------------------------------------------------------------------------------

    def render(self) -> str:
        d, s = self.dir, self.spec
        gres = f" Gres=gpu:{s.gpus}" if s.gpus else ""
        lines = [
            f"ClusterName={s.cluster}",
            # slurmctld only runs on a host whose name is the SlurmctldHost's; the address is the lab's.
            f"SlurmctldHost={socket.gethostname()}({CONTROLLER_ADDRESS})",
            "MailProg=/bin/true",
            f"SlurmctldPort={CONTROLLER_PORT}",
            "SlurmUser=root",
            "AuthType=auth/munge",
            f"AuthInfo=socket={self.sockets / 'munge.socket'}"
            + (f",cred_expire={s.cred_expire_s}" if s.cred_expire_s is not None else ""),
            "CredType=cred/munge",
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={self.sockets / 'spool' / '%n'}",
            f"SlurmctldPidFile={d / 'run' / 'slurmctld.pid'}",
            f"SlurmdPidFile={d / 'run' / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={d / 'log' / 'slurmd-%n.log'}",
            # A chroot-less lab has no cgroup hierarchy of its own to give jobs: processes are tracked by parent.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "ReturnToService=2",
            f"SlurmdTimeout={s.slurmd_timeout_s}",
            "MessageTimeout=5",
            "JobRequeue=1",
            "GresTypes=gpu" if s.gpus else "",
        ]
        if s.health_check_program:
            lines += [f"HealthCheckProgram={s.health_check_program}",
                      f"HealthCheckInterval={s.health_check_interval_s}", "HealthCheckNodeState=ANY"]
        if s.topology is not None:
            lines.append("TopologyPlugin=topology/tree")
        lines += list(s.extra)
        for i, node in enumerate(s.nodes):
            lines.append(f"NodeName={node} NodeHostname=localhost NodeAddr={NODES_ADDRESS} Port={NODE_PORT_BASE + i} "
                         f"CPUs={s.cpus} RealMemory={s.real_memory_mb}{gres} State=UNKNOWN")
        for p in s.partitions:
            lines.append(f"PartitionName={p.name} Nodes={','.join(p.nodes)} Default={'YES' if p.default else 'NO'} "
                         "MaxTime=INFINITE State=UP")
        return "\n".join(line for line in lines if line) + "\n"

    def write(self) -> None:
        for sub in ("state", "log", "run"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        for node in self.spec.nodes:
            (self.sockets / "spool" / node).mkdir(parents=True, exist_ok=True)
        self.sockets.chmod(0o700)
        key = self.dir / "munge.key"
        if not key.exists():
            key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        self.conf.write_text(self.render())
        (self.dir / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nIgnoreSystemd=yes\n")
        topology = self.dir / "topology.conf"
        if self.spec.topology is not None:
            topology.write_text(self.spec.topology)
        else:
            topology.unlink(missing_ok=True)

    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    # processes -----------------------------------------------------------------------------------

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        log = (self.dir / "log" / f"{name}.out").open("ab")
        try:
            self._procs[name] = subprocess.Popen(
                list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, **self.env()}, start_new_session=True)
        finally:
            log.close()

    def start(self, *, nodes: Sequence[str] | None = None, wait_s: float = 30.0) -> None:
        if not addrconfig_ok():
            raise SlurmLabError("getaddrinfo(AI_ADDRCONFIG) resolves no IPv4 address here (a network namespace whose "
                                "only address is 127.0.0.1): add a second loopback address, e.g. "
                                "`ip addr add 127.0.2.250/32 dev lo`, or Slurm's daemons cannot reach each other")
        self.write()
        run = self.dir / "run"
        lifetime.bind_children()
        for pidfile in run.glob("*.pid"):  # a previous run's daemons, if its starter and watchdog were killed
            lifetime.end_leftover(pidfile, str(self.dir))
        self._spawn("munged", [
            "munged", "-F", f"--socket={self.sockets / 'munge.socket'}", f"--key-file={self.dir / 'munge.key'}",
            f"--pid-file={run / 'munged.pid'}", f"--seed-file={run / 'munge.seed'}",
            f"--log-file={self.dir / 'log' / 'munged.log'}", "--force"])
        self._await(lambda: (self.sockets / "munge.socket").exists(), "munged", 10.0)
        self._spawn("slurmctld", ["slurmctld", "-D", "-c"])  # -c: a fresh lab, nothing of a previous run
        self._await(self._controller_up, "slurmctld", wait_s)
        for node in nodes if nodes is not None else self.spec.nodes:
            self.start_node(node)
        self.wait_registered(nodes if nodes is not None else self.spec.nodes, wait_s)

    def start_node(self, node: str) -> None:
        lifetime.bind_children()
        # A child subreaper: the job steps it double-forks (slurmstepd, whose process title overwrites its
        # environment) stay its descendants, for `stop()` and sim/lifetime.py to find. slurmd does not wait for
        # them: a finished step stays a zombie below it until the slurmd exits.
        self._spawn(f"slurmd-{node}", lifetime.reaping(["slurmd", "-D", "-N", node]))

    def kill_node(self, node: str) -> None:
        """The node's slurmd dies (SIGKILL): to Slurm it stops responding, as a host that lost power does. A lab
        another process started (`python -m sim.slurm serve`) is reached through the daemon's pid file."""
        if f"slurmd-{node}" in self._procs:
            self._stop(f"slurmd-{node}", signal.SIGKILL)
            return
        with contextlib.suppress(OSError, ValueError, ProcessLookupError):
            os.kill(int((self.dir / "run" / f"slurmd-{node}.pid").read_text().strip()), signal.SIGKILL)

    def stop_controller(self) -> None:
        self._stop("slurmctld", signal.SIGTERM)

    def start_controller(self, wait_s: float = 30.0) -> None:
        lifetime.bind_children()
        self._spawn("slurmctld", ["slurmctld", "-D"])
        self._await(self._controller_up, "slurmctld", wait_s)

    def _controller_up(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection((CONTROLLER_ADDRESS, CONTROLLER_PORT), 0.5):
            return True
        return False

    def wait_registered(self, nodes: Sequence[str], wait_s: float = 30.0) -> None:
        """Until every node answers slurmctld (no NOT_RESPONDING, not UNKNOWN)."""
        import json

        def registered() -> bool:
            out = subprocess.run(["sinfo", "--json"], capture_output=True, env={**os.environ, **self.env()},
                                 timeout=15, check=False)
            try:
                data = json.loads(out.stdout)
            except ValueError:
                return False
            states = {n["name"]: (n["state"], n.get("state_flags") or []) for n in data.get("nodes", [])}
            return all(name in states and states[name][0] != "unknown" and "NOT_RESPONDING" not in states[name][1]
                       for name in nodes)

        self._await(registered, "slurmd registration", wait_s, interval=0.3)

    def _await(self, check: object, what: str, wait_s: float, interval: float = 0.05) -> None:
        assert callable(check)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            dead = [n for n, p in self._procs.items() if p.poll() is not None and n in ("munged", "slurmctld")]
            if dead:
                raise SlurmLabError(f"{dead[0]} exited while starting: {self.log_tail(dead[0])}")
            if check():
                return
            time.sleep(interval)
        raise SlurmLabError(f"{what} not ready within {wait_s:.0f} s: {self.log_tail('slurmctld')}")

    def log_tail(self, name: str, lines: int = 5) -> str:
        for path in (self.dir / "log" / f"{name}.log", self.dir / "log" / f"{name}.out"):
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").strip().splitlines()
                if text:
                    return " | ".join(text[-lines:])
        return "(no log)"

    def _stop(self, name: str, sig: int) -> None:
        proc = self._procs.pop(name, None)
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)

    def stop(self) -> None:
        below = {pid: t for proc in self._procs.values() for pid, t in lifetime.descendants(proc.pid).items()}
        for name in [n for n in self._procs if n.startswith("slurmd-")] + ["slurmctld", "munged"]:
            self._stop(name, signal.SIGTERM)
        for name in list(self._procs):
            self._stop(name, signal.SIGKILL)
        lifetime.signal_all(below, signal.SIGKILL)  # job steps and their tasks, once their slurmd is gone
        shutil.rmtree(self.sockets, ignore_errors=True)

    @contextlib.contextmanager
    def running(self, **options: object) -> Iterator[SlurmLab]:
        try:
            self.start(**options)  # type: ignore[arg-type]
            yield self
        finally:
            self.stop()
