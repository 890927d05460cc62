"""Keep the job running on golden hosts only. On a failure, a hang (no step for `hang_s`) or a degraded
diagnosis with a suspect host (`RUN/anomalies.jsonl`), it re-runs `provision health --site S` on the job's
hosts and the spare golden hosts, restarts on the hosts that came back golden (suspects dropped), refills
from the spares to the configured number of hosts or shrinks to a size the config allows, and records
each restart in <run>/supervisor.jsonl (cause, hosts dropped and added, checkpoint and step resumed).
A restart that cannot work is not tried: exit codes that mean the configuration is wrong (a host's own, or its
worker's as torchrun's failure summary names it, training/torchrun_report.py: torchrun itself exits 1), too few golden
hosts, a DeepSpeed ZeRO-3 checkpoint on another world size where the installed DeepSpeed has no ZeRO-3
universal checkpoints (with them, the job converts and re-partitions it on resume)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training.checkpoint import latest_complete
from training.diagnosis.report import read_anomalies
from training.launcher import Host, NcclSite, host_command, job_env, torchrun_argv
from training.torchrun_report import NO_RETRY, no_retry_reason, worker_exit

USABLE_VERDICTS = {"golden"}  # restarts go to hosts the health check left (or put) in the golden set
# Diagnoses that restarting without their suspect hosts can cure (labels like checkpoint never restart).
RESTART_KINDS = {"straggler", "dead_link_or_pcie_x4", "gdr_broken", "degraded_link_or_cpu", "slow_collectives",
                 "clock_throttling", "random_stalls"}
DEEPSPEED_RESHAPE = ("DeepSpeed ZeRO-3 checkpoints reload on another world size only through universal checkpoints "
                     "(saved by {old} ranks, the restart would have {new}): {why}")


def _universal_support() -> str | None:
    from training.engines.zero3_checkpoint import universal_support  # imports DeepSpeed: only when asked

    return universal_support()


def zero3_resize_refusal(saved_by: int | None, ranks: int) -> str | None:
    """Why a ZeRO-3 checkpoint saved by `saved_by` ranks cannot resume on `ranks` (None: it can, the same
    size or through a universal checkpoint, `training.engines.zero3_checkpoint`)."""
    if saved_by in (None, ranks):
        return None
    why = _universal_support()
    return None if why is None else DEEPSPEED_RESHAPE.format(old=saved_by, new=ranks, why=why)

HealthCheck = Callable[[Sequence[str]], dict[str, str]]


class HealthCommand:
    """`provision health --site S --hosts {hosts} --level fast --json` (or another template) as a check:
    host -> `golden` (healthy, and promoted by the run or listed by `golden_template`, e.g. `provision
    golden --site S --json`), else its verdict; unknown when the
    check cannot start, runs past `timeout_s` (killed with its process group) or says nothing of a host.
    The failing checks of each host (check -> reason) are kept in `problems` for the diagnosis."""

    def __init__(self, template: str, timeout_s: float = 1800.0, golden_template: str = "") -> None:
        self.template, self.timeout_s, self.golden_template = template, timeout_s, golden_template
        self.problems: dict[str, dict[str, str]] = {}

    def _golden(self, hosts: Sequence[str]) -> set[str]:
        """The golden set after the check (`provision golden --json`): hosts already golden that pass stay
        golden without being promoted again, so the health payload alone does not list them."""
        if not self.golden_template:
            return set()
        stdout = self._run(shlex.split(self.golden_template), hosts)
        try:
            rows = json.loads(stdout or "{}").get("hosts", [])
        except (json.JSONDecodeError, AttributeError):
            return set()
        return {str(r.get("hostname")) for r in rows if isinstance(r, dict)}

    def __call__(self, hosts: Sequence[str]) -> dict[str, str]:
        argv = [a.replace("{hosts}", ",".join(hosts)) for a in shlex.split(self.template)]
        unknown = {h: "unknown" for h in hosts}
        stdout = self._run(argv, hosts)
        if stdout is None:
            return unknown
        try:
            payload = json.loads(stdout)
        except json.JSONDecodeError:
            return unknown
        golden = set(payload.get("promoted_to_golden", [])) | set(payload.get("golden", [])) | self._golden(hosts)
        verdicts: dict[str, str] = {}
        for e in payload.get("hosts", []):
            host, verdict = str(e["host"]), str(e["verdict"])
            verdicts[host] = "golden" if verdict == "healthy" and host in golden else verdict
            self.problems[host] = {str(p["check"]): str(p.get("reason") or p.get("status"))
                                   for p in e.get("problems", []) if isinstance(p, dict) and "check" in p}
        return {h: verdicts.get(h, "unknown") for h in hosts}

    def _run(self, argv: list[str], hosts: Sequence[str]) -> str | None:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
        except OSError as e:
            _log(f"health check could not start ({e}); every host counts as unknown: {', '.join(hosts)}")
            return None
        try:
            stdout, _ = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()  # not communicate(): a descendant that left the group may still hold the pipes
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            _log(f"health check still running after {self.timeout_s:g} s, killed ({shlex.join(argv)}); "
                 f"every host counts as unknown: {', '.join(hosts)}")
            return None
        return stdout


def provision_health(template: str, timeout_s: float = 1800.0, golden_template: str = "") -> HealthCommand:
    return HealthCommand(template, timeout_s, golden_template)


@dataclass(frozen=True)
class Stop:
    """Why an attempt ended early: `degraded` (a diagnosis with suspects) or `hung` (no step for hang_s)."""

    cause: str
    kind: str = ""
    suspects: tuple[str, ...] = ()


def degraded(run_dir: Path, seen: int) -> tuple[Stop | None, int]:
    """The first new alert (after the first `seen` rows) of a kind a restart can cure and with a suspect."""
    rows = read_anomalies(run_dir)
    for row in rows[seen:]:
        raw = row.get("hosts")
        hosts = tuple(str(h) for h in raw) if isinstance(raw, list) else ()
        if row.get("alert") and row.get("kind") in RESTART_KINDS and hosts:
            return Stop("degraded", str(row["kind"]), hosts), len(rows)
    return None, len(rows)


def hung(run_dir: Path, started: float, hang_s: float, now: float | None = None) -> Stop | None:
    """No step written by rank 0 for `hang_s` (counted from the attempt's start before its first step)."""
    if hang_s <= 0:
        return None
    metrics = run_dir / "metrics_rank0.jsonl"
    last = max(metrics.stat().st_mtime if metrics.exists() else 0.0, started)
    return Stop("hung") if (now or time.time()) - last > hang_s else None


def checkpoint_world(run_dir: Path) -> tuple[str | None, int | None, int | None]:
    """(name, ranks that saved it, step) of the last complete checkpoint."""
    ckpt = latest_complete(run_dir / "checkpoints")
    if ckpt is None:
        return None, None, None
    extras = sorted(ckpt.glob("extra_rank*.json"))
    step = json.loads(extras[0].read_text()).get("step") if extras else None
    return ckpt.name, len(extras), step if isinstance(step, int) else None


@dataclass
class Plan:
    hosts: list[str]
    dropped: dict[str, str] = field(default_factory=dict)
    added: list[str] = field(default_factory=list)
    refused: str | None = None


def plan_restart(job: Sequence[str], spares: Sequence[str], verdicts: dict[str, str], suspects: Sequence[str],
                 world_hosts: int, sizes: Sequence[int]) -> Plan:
    """Golden job hosts (suspects dropped), then golden spares to `world_hosts`, else the largest allowed
    size that the golden hosts fill; refused when none."""
    keep = [h for h in job if verdicts.get(h, "unknown") in USABLE_VERDICTS and h not in suspects]
    dropped = {h: ("suspect" if h in suspects else verdicts.get(h, "unknown")) for h in job if h not in keep}
    fresh = [h for h in spares if verdicts.get(h, "unknown") in USABLE_VERDICTS]
    added = fresh[:max(world_hosts - len(keep), 0)]
    hosts = keep + added
    if len(hosts) < world_hosts:
        fit = [s for s in sizes if s <= len(hosts)]
        if not fit:
            return Plan([], dropped, [], f"{len(hosts)} golden host(s), the config allows {sorted(sizes)}")
        hosts = hosts[:max(fit)]
        added = [h for h in added if h in hosts]
    return Plan(hosts, dropped, added)


def record(run_dir: Path, event: str, **fields: Any) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "supervisor.jsonl", "a") as f:
        f.write(json.dumps({"event": event, "time": time.time(), **fields}) + "\n")


def write_evidence(run_dir: Path, problems: dict[str, dict[str, str]]) -> None:
    """The hosts' failing health checks for the diagnosis (`RUN/evidence.json`), port counters kept."""
    path = run_dir / "evidence.json"
    old = json.loads(path.read_text()) if path.is_file() and path.stat().st_size < 4 << 20 else {}
    old["health"] = {h: p for h, p in problems.items() if p}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(old, sort_keys=True))
    os.replace(tmp, path)


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
    spares: list[Host] = field(default_factory=list)
    sizes: tuple[int, ...] = ()  # host counts a restart may shrink to (besides the configured one)
    engine: str = "fsdp"
    env: dict[str, str] = field(default_factory=dict)  # --env KEY=VALUE for every rank
    hang_s: float = 0.0  # no step for this long: hung (0: not watched)
    restart_on_anomaly: bool = True
    rdzv_host: str = ""  # where every node finds the rendezvous store (default: the first host's name)
    anomaly_cmd: str = ""  # after each attempt, e.g. `provision anomalies --site S --run-dir {run_dir}`
    stop: Stop | None = None  # why the last attempt was stopped early, if it was
    _seen_anomalies: int = 0
    _logs: dict[str, tuple[Path, int]] = field(default_factory=dict)  # host -> its attempt log, where it began

    def _record(self, event: str, **fields: object) -> None:
        record(self.run_dir, event, **fields)

    def commands(self, hosts: Sequence[Host], attempt: int) -> list[tuple[Host, list[str], dict[str, str]]]:
        rdzv_host = self.rdzv_host or ("127.0.0.1" if hosts[0].local else hosts[0].name)
        rdzv = f"{rdzv_host}:{self.rdzv_port}"
        env = job_env(self.nccl, self.run_dir, attempt, self.env)
        out = []
        for i, h in enumerate(hosts):
            argv = torchrun_argv(self.python, hosts, i, rdzv, f"{self.job}-{attempt}", str(self.run_dir),
                                 self.train_args)
            host_env = {**env, "TRAINING_HOST": h.name}
            out.append((h, host_command(h, argv, host_env, self.workdir), host_env))
        return out

    def _watch(self, started: float) -> Stop | None:
        stop, self._seen_anomalies = degraded(self.run_dir, self._seen_anomalies)
        if stop is not None and self.restart_on_anomaly:
            return stop
        return hung(self.run_dir, started, self.hang_s)

    def run_attempt(self, hosts: Sequence[Host], attempt: int) -> dict[str, int]:
        """Start one torchrun per host; when any exits non-zero, or the job hangs or is diagnosed degraded
        (`self.stop` says which), stop the others. Host -> exit code."""
        procs: dict[str, subprocess.Popen[bytes]] = {}
        logs = self.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "nccl_trace").mkdir(exist_ok=True)
        started = time.time()
        self._logs = {}
        for host, argv, env in self.commands(hosts, attempt):
            out = open(logs / f"attempt{attempt}_{host.name}.log", "ab")  # noqa: SIM115
            self._logs[host.name] = (Path(out.name), out.tell())
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
                self.stop = self._watch(started)
                if self.stop is not None:
                    break
                time.sleep(0.2)
        finally:
            for name, p in procs.items():
                if p.poll() is None:
                    _stop(p, self.grace_s)
                codes.setdefault(name, p.returncode if p.returncode is not None else -signal.SIGKILL)
        return codes

    def _record_anomalies(self) -> None:
        """The attempt's diagnoses into the suspect hosts' state-store history (best effort: the job goes on)."""
        if self.anomaly_cmd and (self.run_dir / "anomalies.jsonl").exists():
            self._anomaly_cmd([])

    def _port_evidence(self, hosts: Sequence[Host]) -> None:
        """Before an attempt: the job hosts' HCA port counters from the state store into RUN/evidence.json
        (`--port-evidence`), so a link diagnosis names the host whose counters rose."""
        if self.anomaly_cmd:
            self._anomaly_cmd(["--port-evidence", ",".join(h.name for h in hosts)])

    def _anomaly_cmd(self, extra: list[str]) -> None:
        argv = [a.replace("{run_dir}", str(self.run_dir)) for a in shlex.split(self.anomaly_cmd)] + extra
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)
            if r.returncode != 0:
                _log(f"anomalies not recorded ({shlex.join(argv)} exited {r.returncode}): {r.stderr.strip()[-300:]}")
        except (OSError, subprocess.TimeoutExpired) as e:
            _log(f"anomalies not recorded ({e})")

    def worker_exits(self, codes: dict[str, int]) -> dict[str, int]:
        """Host -> the code of the worker that made its torchrun exit 1, where its log's summary names one."""
        found = {h: worker_exit(c, *self._logs[h]) for h, c in codes.items() if h in self._logs}
        return {h: c for h, c in found.items() if c is not None}

    def _refusal(self, codes: dict[str, int], attempt: int) -> str | None:
        if attempt >= self.max_restarts:
            return "restart limit reached"
        hopeless = sorted({c for c in codes.values() if c in NO_RETRY})
        return no_retry_reason(hopeless[0]) if hopeless and self.stop is None else None

    def run(self) -> int:
        hosts, spares = list(self.hosts), list(self.spares)
        world_hosts, attempt = len(hosts), 0
        while True:
            self.stop = None
            self._record("start", attempt=attempt, hosts=[h.name for h in hosts], checkpoint=_ckpt_name(self.run_dir),
                         env=sorted(job_env(self.nccl, self.run_dir, attempt, self.env)))
            self._port_evidence(hosts)
            codes = self.run_attempt(hosts, attempt)
            self._record_anomalies()
            if self.stop is None and all(c == 0 for c in codes.values()):
                self._record("finished", attempt=attempt)
                return 0
            failed = {h: c for h, c in codes.items() if c != 0}
            cause = self.stop.cause if self.stop else "failed"
            workers = self.worker_exits(failed)
            why = self._refusal({**codes, **workers}, attempt)
            if why is not None:
                self._record("gave_up", attempt=attempt, cause=cause, failed=failed, worker_exits=workers, reason=why)
                return 1
            suspects = self.stop.suspects if self.stop else ()
            verdicts = self.health([h.name for h in hosts] + [h.name for h in spares])
            problems = getattr(self.health, "problems", None)
            if isinstance(problems, dict):
                write_evidence(self.run_dir, problems)
            plan = plan_restart([h.name for h in hosts], [h.name for h in spares], verdicts, suspects, world_hosts,
                                tuple(s for s in self.sizes if s >= self.min_hosts))
            name, saved_by, step = checkpoint_world(self.run_dir)
            by_name = {h.name: h for h in [*hosts, *spares]}
            new_hosts = [by_name[n] for n in plan.hosts]
            ranks = sum(min(h.slots for h in new_hosts) for _ in new_hosts) if new_hosts else 0
            refused = plan.refused or (zero3_resize_refusal(saved_by, ranks) if self.engine == "deepspeed" else None)
            if refused:
                self._record("gave_up", attempt=attempt, cause=cause, failed=failed, worker_exits=workers,
                             verdicts=verdicts, dropped=plan.dropped, reason=refused)
                return 1
            self._record("restart", attempt=attempt + 1, cause=cause, kind=self.stop.kind if self.stop else None,
                         failed=failed, worker_exits=workers, verdicts=verdicts, dropped=plan.dropped, added=plan.added,
                         hosts=plan.hosts, checkpoint=name, resume_step=step)
            hosts = new_hosts
            spares = [h for h in spares if h.name not in plan.added and h.name not in plan.dropped]
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
