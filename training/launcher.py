"""`python -m training launch`: start the job on every host of the golden hostfile and keep it
running. One torchrun per host (c10d rendezvous on the first host, over SSH; hosts named
localhost/127.x run without SSH), NCCL settings from the site, the flight recorder on. On a
failure the supervisor re-runs the health checks on the job's hosts, drops those that are not
fit, and restarts from the last complete checkpoint; restarts are bounded and each is recorded
in <run>/supervisor.jsonl."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from training.checkpoint import latest_complete

LOCAL_NAMES = {"localhost", "127.0.0.1", "::1"}
# Verdicts of `provision health` a restarted job may use (Imbue's levels: unhealthy hosts are
# usable, critical ones never; unknown means the check could not tell, so the host is left out).
USABLE_VERDICTS = {"healthy", "unhealthy"}


class LaunchError(Exception):
    """The job could not be launched or kept running."""


@dataclass(frozen=True)
class Host:
    name: str
    slots: int

    @property
    def local(self) -> bool:
        return self.name in LOCAL_NAMES or self.name.startswith("127.")


def parse_hostfile(text: str, default_slots: int) -> list[Host]:
    """DeepSpeed/MPI style (`host slots=N`) or one host per line; `#` comments. Duplicates are
    an error: two torchruns on one host would fight over its GPUs."""
    hosts: list[Host] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, *rest = line.split()
        slots = default_slots
        for item in rest:
            key, _, value = item.partition("=")
            if key in ("slots", "max_slots") and value.isdigit() and int(value) > 0:
                slots = int(value)
            else:
                raise LaunchError(f"hostfile line {n}: cannot read {item!r}")
        if any(h.name == name for h in hosts):
            raise LaunchError(f"hostfile line {n}: {name} listed twice")
        hosts.append(Host(name, slots))
    if not hosts:
        raise LaunchError("hostfile lists no hosts")
    return hosts


@dataclass(frozen=True)
class NcclSite:
    """The site's NCCL settings (site file, key `nccl`): HCAs to use, GPUDirect RDMA level,
    bootstrap interface, RoCE GID index, and any further NCCL_* variables verbatim."""

    ib_hca: str | None = None
    gdr_level: str | None = None
    socket_ifname: str | None = None
    ib_gid_index: int | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, object]) -> NcclSite:
        known = {"ib_hca", "gdr_level", "socket_ifname", "ib_gid_index", "env"}
        unknown = set(raw) - known
        if unknown:
            raise LaunchError(f"nccl: unknown keys {sorted(unknown)} (known: {sorted(known)})")
        extra = raw.get("env") or {}
        if not isinstance(extra, Mapping) or not all(str(k).startswith(("NCCL_", "TORCH_NCCL_")) for k in extra):
            raise LaunchError("nccl.env: a mapping of NCCL_* / TORCH_NCCL_* variables")
        gid = raw.get("ib_gid_index")
        return cls(ib_hca=_opt_str(raw.get("ib_hca")), gdr_level=_opt_str(raw.get("gdr_level")),
                   socket_ifname=_opt_str(raw.get("socket_ifname")),
                   ib_gid_index=int(str(gid)) if gid is not None else None,
                   extra={str(k): str(v) for k, v in extra.items()})

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.ib_hca:
            out["NCCL_IB_HCA"] = self.ib_hca
        if self.gdr_level:
            out["NCCL_NET_GDR_LEVEL"] = self.gdr_level
        if self.socket_ifname:
            out["NCCL_SOCKET_IFNAME"] = self.socket_ifname
            out["GLOO_SOCKET_IFNAME"] = self.socket_ifname
        if self.ib_gid_index is not None:
            out["NCCL_IB_GID_INDEX"] = str(self.ib_gid_index)
        out.update(self.extra)
        return out


def _opt_str(v: object) -> str | None:
    return None if v is None else str(v)


def load_nccl_site(path: Path | None) -> NcclSite:
    if path is None:
        return NcclSite()
    raw = yaml.safe_load(path.read_text()) or {}
    section = raw.get("nccl", {}) if isinstance(raw, dict) else {}
    if not isinstance(section, dict):
        raise LaunchError(f"{path}: `nccl` must be a mapping")
    return NcclSite.from_mapping(section)


def hcas_from_fabric_design(path: Path, hosts: Sequence[str]) -> str | None:
    """NCCL_IB_HCA from the fabric design (`fabric design generate`): the HCAs every job host has,
    in the design's order. None when the design names none of them."""
    raw = yaml.safe_load(path.read_text()) or {}
    by_host = {str(h["name"]): [str(x) for x in h.get("hcas", [])] for h in raw.get("hosts", []) if "name" in h}
    lists = [by_host[h] for h in hosts if h in by_host]
    if not lists:
        return None
    common = [hca for hca in lists[0] if all(hca in other for other in lists[1:])]
    return ",".join(common) or None


def job_env(nccl: NcclSite, run_dir: Path, attempt: int) -> dict[str, str]:
    """Environment every rank gets: site NCCL settings, the flight recorder (dumped on a
    collective timeout, one file per rank under the run), the attempt number."""
    env = {
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",  # name before PyTorch 2.9
        "TORCH_FR_BUFFER_SIZE": "2000",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(run_dir / "nccl_trace" / "rank_"),
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "PYTHONUNBUFFERED": "1",
        "TRAINING_ATTEMPT": str(attempt),
    }
    env.update(nccl.env())
    return env


def torchrun_argv(python: str, hosts: Sequence[Host], node_rank: int, rdzv: str, job_id: str,
                  train_args: Sequence[str]) -> list[str]:
    nproc = min(h.slots for h in hosts)
    return [python, "-m", "torch.distributed.run", f"--nnodes={len(hosts)}", f"--nproc-per-node={nproc}",
            f"--node-rank={node_rank}", "--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv}", f"--rdzv-id={job_id}",
            "--max-restarts=0", "-m", "training", "train", *train_args]


def host_command(host: Host, argv: Sequence[str], env: Mapping[str, str], workdir: Path) -> list[str]:
    if host.local:
        return list(argv)
    assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
    remote = f"cd {shlex.quote(str(workdir))} && env {assignments} {shlex.join(argv)}"
    # -tt: the remote torchrun gets a terminal, so when the supervisor stops this ssh client the remote
    # side sees SIGHUP and torchrun tears its workers down instead of running on orphaned.
    return ["ssh", "-tt", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=30", host.name, remote]


HealthCheck = Callable[[Sequence[str]], dict[str, str]]


def provision_health(template: str, timeout_s: float = 1800.0) -> HealthCheck:
    """Run the project's health check (default `provision health … --json`) on the given hosts and
    return host -> verdict. A host missing from the answer counts as unknown; so does every host when
    the check cannot start or runs past `timeout_s` (it is killed, with everything it started)."""

    def check(hosts: Sequence[str]) -> dict[str, str]:
        argv = [a.replace("{hosts}", ",".join(hosts)) for a in shlex.split(template)]
        unknown = {h: "unknown" for h in hosts}
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
        except OSError as e:
            _log(f"health check could not start ({e}); every host counts as unknown: {', '.join(hosts)}")
            return unknown
        try:
            stdout, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()  # not communicate(): a descendant that left the group may still hold the pipes
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            _log(f"health check still running after {timeout_s:g} s, killed ({shlex.join(argv)}); "
                 f"every host counts as unknown: {', '.join(hosts)}")
            return unknown
        try:
            payload = json.loads(stdout)
        except json.JSONDecodeError:
            return unknown
        verdicts = {str(e["host"]): str(e["verdict"]) for e in payload.get("hosts", [])}
        return {h: verdicts.get(h, "unknown") for h in hosts}

    return check


@dataclass
class Supervisor:
    hosts: list[Host]
    train_args: list[str]
    run_dir: Path
    health: HealthCheck
    nccl: NcclSite = field(default_factory=NcclSite)
    max_restarts: int = 3
    min_hosts: int = 1
    rdzv_port: int = 29500
    python: str = sys.executable
    workdir: Path = field(default_factory=Path.cwd)
    job: str = "bringup-train"
    grace_s: float = 20.0

    def _record(self, event: str, **fields: object) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / "supervisor.jsonl", "a") as f:
            f.write(json.dumps({"event": event, "time": time.time(), **fields}) + "\n")

    def commands(self, hosts: Sequence[Host], attempt: int) -> list[tuple[Host, list[str], dict[str, str]]]:
        rdzv_host = "127.0.0.1" if hosts[0].local else hosts[0].name
        rdzv = f"{rdzv_host}:{self.rdzv_port}"
        env = job_env(self.nccl, self.run_dir, attempt)
        out = []
        for i, h in enumerate(hosts):
            argv = torchrun_argv(self.python, hosts, i, rdzv, f"{self.job}-{attempt}", self.train_args)
            out.append((h, host_command(h, argv, env, self.workdir), env))
        return out

    def run_attempt(self, hosts: Sequence[Host], attempt: int) -> dict[str, int]:
        """Start one torchrun per host; when any exits non-zero, stop the others. Host -> exit code."""
        procs: dict[str, subprocess.Popen[bytes]] = {}
        logs = self.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "nccl_trace").mkdir(exist_ok=True)
        for host, argv, env in self.commands(hosts, attempt):
            out = open(logs / f"attempt{attempt}_{host.name}.log", "ab")  # noqa: SIM115
            procs[host.name] = subprocess.Popen(argv, env={**os.environ, **env}, stdin=subprocess.DEVNULL, stdout=out,
                                                stderr=subprocess.STDOUT, cwd=self.workdir, start_new_session=True)
            out.close()
        codes: dict[str, int] = {}
        try:
            while len(codes) < len(procs):
                for name, p in procs.items():
                    if name not in codes and p.poll() is not None:
                        codes[name] = p.returncode
                if any(c != 0 for c in codes.values()):
                    break
                time.sleep(0.2)
        finally:
            for name, p in procs.items():
                if p.poll() is None:
                    _stop(p, self.grace_s)
                codes.setdefault(name, p.returncode if p.returncode is not None else -signal.SIGKILL)
        return codes

    def run(self) -> int:
        hosts = list(self.hosts)
        attempt = 0
        while True:
            self._record("start", attempt=attempt, hosts=[h.name for h in hosts],
                         checkpoint=_ckpt_name(self.run_dir))
            codes = self.run_attempt(hosts, attempt)
            if all(c == 0 for c in codes.values()):
                self._record("finished", attempt=attempt)
                return 0
            failed = {h: c for h, c in codes.items() if c != 0}
            if attempt >= self.max_restarts:
                self._record("gave_up", attempt=attempt, failed=failed, reason="restart limit reached")
                return 1
            verdicts = self.health([h.name for h in hosts])
            keep = [h for h in hosts if verdicts.get(h.name, "unknown") in USABLE_VERDICTS]
            dropped = {h.name: verdicts.get(h.name, "unknown") for h in hosts if h not in keep}
            if len(keep) < self.min_hosts:
                self._record("gave_up", attempt=attempt, failed=failed, dropped=dropped,
                             reason=f"{len(keep)} usable host(s) < min_hosts {self.min_hosts}")
                return 1
            self._record("restart", attempt=attempt + 1, failed=failed, verdicts=verdicts, dropped=dropped,
                         checkpoint=_ckpt_name(self.run_dir))
            hosts = keep
            attempt += 1


def _log(msg: str) -> None:
    print(f"launch: {msg}", file=sys.stderr, flush=True)


def _ckpt_name(run_dir: Path) -> str | None:
    c = latest_complete(run_dir / "checkpoints")
    return c.name if c else None


def _stop(p: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the whole process group (torchrun and its workers), SIGKILL after the grace period."""
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    except ProcessLookupError:
        p.wait()


def main(argv: list[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in raw:
        i = raw.index("--")
        raw, extra = raw[:i], raw[i + 1:]
    p = argparse.ArgumentParser(prog="python -m training launch",
                                epilog="arguments after -- go to every rank's `python -m training train`")
    p.add_argument("--hostfile", type=Path, required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--engine", choices=("fsdp", "deepspeed"), default="fsdp")
    p.add_argument("--run-dir", type=Path, help="shared by every host (default runs/CONFIG-ENGINE)")
    p.add_argument("--gpus-per-host", type=int, default=8, help="slots for hostfile lines without slots=")
    p.add_argument("--site", type=Path, help="site YAML with an `nccl` mapping")
    p.add_argument("--fabric-design", type=Path,
                   help="fabric design YAML: NCCL_IB_HCA from the job hosts' HCAs when the site sets none")
    p.add_argument("--max-restarts", type=int, default=3)
    p.add_argument("--min-hosts", type=int, default=1)
    p.add_argument("--rdzv-port", type=int, default=29500)
    p.add_argument("--health-cmd", default="provision health --hosts {hosts} --level fast --json",
                   help="run after a failure; prints JSON {hosts: [{host, verdict}]}")
    p.add_argument("--health-timeout-s", type=float, default=1800.0,
                   help="kill the health check after this long; every host then counts as unknown")
    p.add_argument("--python", default=sys.executable, help="Python on the hosts")
    p.add_argument("--workdir", type=Path, default=Path.cwd(), help="project checkout on the hosts")
    p.add_argument("--dry-run", action="store_true", help="print each host's command and exit")
    a = p.parse_args(raw)
    try:
        hosts = parse_hostfile(a.hostfile.read_text(), a.gpus_per_host)
        run_dir = (a.run_dir or Path("runs") / f"{a.config}-{a.engine}").resolve()
        train_args = ["--config", a.config, "--engine", a.engine, "--run-dir", str(run_dir), *extra]
        nccl = load_nccl_site(a.site)
        if nccl.ib_hca is None and a.fabric_design is not None:
            nccl = replace(nccl, ib_hca=hcas_from_fabric_design(a.fabric_design, [h.name for h in hosts]))
        sup = Supervisor(hosts, train_args, run_dir, provision_health(a.health_cmd, a.health_timeout_s), nccl,
                         a.max_restarts, a.min_hosts, a.rdzv_port, a.python, a.workdir)
    except (LaunchError, OSError, yaml.YAMLError) as e:
        print(f"launch: {e}", file=sys.stderr)
        return 2
    if a.dry_run:
        for host, cmd, env in sup.commands(hosts, 0):
            prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())) if host.local else ""
            print(f"{host.name}: {prefix} {shlex.join(cmd)}".replace(":  ", ": "))
        return 0
    return sup.run()
