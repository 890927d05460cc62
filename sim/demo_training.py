"""The demo's last stage: a few steps of the tiny model on the golden hostfile, launched by the real launcher
(`python -m training launch`) and kept running by its golden-only supervisor (training/supervisor.py).

The simulated GPU hosts replay captured GPU tools and cannot hold PyTorch, so every rank runs on this machine
(CPU, gloo, one rank per host) through the same SSH path a site's ranks take: the launcher's `ssh -tt HOST`
reaches each host's own endpoint (an ssh_config written from the lab's address map, key and known_hosts, read
by an `ssh` put first on the launcher's PATH), and the host starts the rank with `$BRINGUP_SIM_HOST_PYTHON`
(a Python on the test host that runs on this machine) or, without it, this interpreter. The health re-check
after a failure is the real `provision health --site S` over the lab's SSH hosts. MFU is measured against
this machine's single-thread float32 matmul rate (the ranks run one thread each), not a GPU's peak.

Settings and faults come from `training-demo.yml` beside the site. `lose_host: {job_host: N, after_step: S}`
loses the job's N-th host once rank 0 has logged step S: its SSH endpoint in the stage's copy of the address
map is pointed at a closed port (the host stops answering) and its rank processes are killed, as a host that
lost power. The run is kept under the lab's run directory (`training/`), where `provision report` reads it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from provision.command.output import console, esc
from provision.site.bounded import read_bytes, read_text
from report.gather_files import read_json
from sim.addresses import free_port as _free_port
from sim.demo_training_ssh import SshPath, kill, rank_processes
from training.jsonl import read_jsonl

REPO = Path(__file__).resolve().parents[1]
SETTINGS_FILE = "training-demo.yml"
RUN_NAME = "training"
ENV_HOST_PYTHON = "BRINGUP_SIM_HOST_PYTHON"
LAUNCH_TIMEOUT_S = 300.0
CORPUS_DOCS = ("README.md", "ARCHITECTURE.md", "training/README.md", "sim/sshhosts/README.md")
VOCAB = 448  # within the tiny model's 512


@dataclass(frozen=True)
class HostLoss:
    job_host: int  # 1-based position in the job's hostfile
    after_step: int


@dataclass(frozen=True)
class StageSettings:
    job_hosts: int = 2
    steps: int = 12
    checkpoint_every: int = 4
    seq_len: int = 128
    micro_batch: int = 2
    lose_host: HostLoss | None = None


def _positive(raw: dict[str, Any], key: str, default: int, where: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: {key} must be a positive integer, not {value!r}")
    return value


def load_settings(site_dir: Path) -> StageSettings:
    """`training-demo.yml` beside the site, or the defaults (a clean run) without one."""
    path = site_dir / SETTINGS_FILE
    if not path.is_file():
        return StageSettings()
    raw = yaml.safe_load(read_text(path, limit=64 << 10, what=SETTINGS_FILE)) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a mapping")
    base = StageSettings()
    values = {k: _positive(raw, k, getattr(base, k), str(path))
              for k in ("job_hosts", "steps", "checkpoint_every", "seq_len", "micro_batch")}
    lose = (raw.get("faults") or {}).get("lose_host")
    loss = None
    if lose is not None:
        if not isinstance(lose, dict):
            raise ValueError(f"{path}: faults.lose_host is {{job_host: N, after_step: S}}")
        loss = HostLoss(_positive(lose, "job_host", 1, str(path)), _positive(lose, "after_step", 1, str(path)))
    return StageSettings(**values, lose_host=loss)


def last_step(run: Path) -> int:
    """The last step rank 0 logged (its own JSONL; the tail is enough)."""
    path = run / "metrics_rank0.jsonl"
    try:
        tail = read_bytes(path, limit=64 << 20, what="rank 0 metrics")[-(64 << 10):]
    except OSError:
        return 0
    steps = [0]
    for line in tail.decode(errors="replace").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and row.get("event") == "step" and isinstance(row.get("step"), int):
            steps.append(row["step"])
    return max(steps)


class LoseHost(threading.Thread):
    """The `lose_host` fault: once rank 0 has logged the step, the host's endpoint is cut and its ranks killed."""

    def __init__(self, loss: HostLoss, host: str, run: Path, ssh: SshPath) -> None:
        super().__init__(daemon=True)
        self.loss, self.host, self.run_dir, self.ssh = loss, host, run, ssh
        self.done = threading.Event()
        self.report: dict[str, Any] = {}

    def run(self) -> None:
        while not self.done.wait(0.02):
            step = last_step(self.run_dir)
            if step >= self.loss.after_step:
                endpoint = self.ssh.cut(self.host)
                pids = kill(rank_processes(self.run_dir, self.host))
                self.report = {"host": self.host, "at_step": step, "endpoint": endpoint, "killed": pids}
                return


def cpu_peak_tflops(n: int = 256, rounds: int = 6, seconds: float = 0.05) -> float:
    """This machine's single-thread float32 matmul rate (TFLOP/s), the CPU ranks' MFU denominator: the best of a
    few short rounds, so a busy moment of the shared cores does not lower it."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a, b = torch.randn(n, n), torch.randn(n, n)
        a @ b
        best = 0.0
        for _ in range(rounds):
            count, started = 0, time.perf_counter()
            while (elapsed := time.perf_counter() - started) < seconds:
                a @ b
                count += 1
            best = max(best, 2 * n**3 * count / elapsed / 1e12)
        return best
    finally:
        torch.set_num_threads(threads)


def write_corpus(folder: Path) -> tuple[Path, Path]:
    """The project's own documentation as a JSONL shard (one paragraph a document) and a tokenizer trained on it."""
    from training.tokenizer import train_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    shard = folder / "docs.jsonl"
    with open(shard, "w", encoding="utf-8") as out:
        for doc in CORPUS_DOCS:
            text = read_text(REPO / doc, limit=1 << 20, what=doc) if (REPO / doc).is_file() else ""
            for i, para in enumerate(p.strip() for p in text.split("\n\n")):
                if para:
                    out.write(json.dumps({"id": f"{doc}:{i}", "text": para}) + "\n")
    tokenizer = folder / "tokenizer.json"
    train_tokenizer([shard], VOCAB, tokenizer)
    return shard, tokenizer


def golden_hosts(site_file: str, run: Path) -> list[str]:
    """The golden hostfile, written by `provision golden --format deepspeed` as the demo's step before printed it."""
    from provision.cli import main as provision_main

    hostfile = run / "golden.txt"
    code = provision_main(["golden", "--format", "deepspeed", "--output", str(hostfile), "--site", site_file])
    if code != 0 or not hostfile.is_file():
        return []
    lines = (line.split("#", 1)[0].split() for line in hostfile.read_text().splitlines())
    return [parts[0] for parts in lines if parts]


def launch_argv(site_file: str, s: StageSettings, run: Path, corpus: tuple[Path, Path], port: int) -> list[str]:
    python = os.environ.get(ENV_HOST_PYTHON) or sys.executable
    return [sys.executable, "-m", "training", "launch", "--hostfile", str(run / "job.txt"),
            "--spares", str(run / "spares.txt"), "--config", "tiny", "--run-dir", str(run), "--gpus-per-host", "1",
            "--site", site_file, "--max-restarts", "2", "--rdzv-host", "127.0.0.1", "--rdzv-port", str(port),
            "--python", python, "--workdir", str(REPO), "--health-timeout-s", "120", "--hang-s", "120", "--",
            "--data", str(corpus[0]), "--tokenizer", str(corpus[1]), "--seq-len", str(s.seq_len),
            "--micro-batch", str(s.micro_batch), "--steps", str(s.steps), "--checkpoint-every",
            str(s.checkpoint_every), "--warmup-steps", "2", "--lr", "3e-3", "--loss-chunk-tokens", "96",
            "--keep-checkpoints", "3"]


def _hostfiles(run: Path, golden: list[str], s: StageSettings) -> tuple[list[str], list[str]]:
    """The job's hosts and its spares, one slot each (one CPU rank per host: the hosts' GPUs are simulated)."""
    job, spares = golden[:s.job_hosts], golden[s.job_hosts:]
    (run / "job.txt").write_text("".join(f"{h} slots=1\n" for h in job))
    (run / "spares.txt").write_text("".join(f"{h} slots=1\n" for h in spares))
    return job, spares


def _launch(argv: list[str], env: dict[str, str], run: Path, watcher: LoseHost | None) -> int:
    """The launcher to its end (or LAUNCH_TIMEOUT_S), its output in RUN/launcher.log; no rank outlives it."""
    with open(run / "launcher.log", "wb") as log:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    if watcher is not None:
        watcher.start()
    try:
        return proc.wait(timeout=LAUNCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        console.print(f"[red]the launcher ran past {LAUNCH_TIMEOUT_S:.0f} s: stopped")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return 124
    finally:
        if watcher is not None:
            watcher.done.set()
            watcher.join()
        kill(rank_processes(run))


def _steps(run: Path) -> dict[int, dict[str, Any]]:
    path = run / "metrics.jsonl"
    rows = read_jsonl(path, 64 << 20) if path.is_file() else []
    return {r["step"]: r for r in rows if r.get("event") == "step" and r.get("rank") == 0
            and isinstance(r.get("step"), int)}


def _said(event: dict[str, Any]) -> str:
    kind, attempt = event.get("event"), event.get("attempt")
    if kind == "start":
        hosts = ", ".join(event.get("hosts", []))
        return f"attempt {attempt} on {hosts} (checkpoint: {event.get('checkpoint') or 'none'})"
    if kind == "restart":
        verdicts = ", ".join(f"{h} {v}" for h, v in sorted((event.get("verdicts") or {}).items()))
        dropped = ", ".join(f"{h} ({v})" for h, v in (event.get("dropped") or {}).items()) or "none"
        return (f"{event.get('cause')}: exit codes {event.get('failed')}; health re-check: {verdicts}"
                f"\n    restart {attempt}: dropped {dropped}; added {', '.join(event.get('added') or []) or 'none'}; "
                f"resumes from {event.get('checkpoint') or 'the start'} (step {event.get('resume_step') or 0})")
    if kind == "gave_up":
        return f"gave up after attempt {attempt} ({event.get('cause')}): {event.get('reason')}"
    return f"{kind} (attempt {attempt})"


def explain(run: Path, lost: dict[str, Any]) -> bool:
    """What the supervisor recorded and what the job logged; whether the injected loss (if any) was caught."""
    path = run / "supervisor.jsonl"
    events = read_jsonl(path, 4 << 20) if path.is_file() else []
    evidence, _ = read_json(run / "evidence.json")
    health = evidence.get("health", {}) if isinstance(evidence, dict) else {}
    for event in events:
        console.print(f"  supervisor: {esc(_said(event))}")
        for host in event.get("dropped") or {} if event.get("event") == "restart" else {}:
            problems = "; ".join(f"{check}: {why}" for check, why in (health.get(host) or {}).items())
            console.print(f"    {host}'s health evidence (RUN/evidence.json): {esc(problems or 'none recorded')}")
    steps = _steps(run)
    if steps:
        first, last = steps[min(steps)], steps[max(steps)]
        mfu = sorted(r["mfu"] for r in steps.values() if isinstance(r.get("mfu"), float))
        median = f"{100 * mfu[len(mfu) // 2]:.1f}%" if mfu else "none"
        console.print(f"  loss {first['loss']:.3f} at step {min(steps)} -> {last['loss']:.3f} at step {max(steps)}; "
                      f"median MFU {median} ({esc(run / 'metrics.jsonl')})")
    if not lost:
        return True
    caught = [e for e in events if e.get("event") == "restart" and lost["host"] in (e.get("dropped") or {})]
    stopped = [e for e in events if e.get("event") == "gave_up" and lost["host"] in (e.get("dropped") or {})]
    if stopped and not caught:
        console.print(f"  [red]caught, but the job could not go on[/]: {lost['host']} was lost after step "
                      f"{lost['at_step']} and left out; {esc(stopped[0].get('reason'))} ({esc(path)})")
    elif caught:
        console.print(f"  [green]caught[/]: {lost['host']} was lost after step {lost['at_step']}; the supervisor's "
                      f"health re-check left it out ({caught[0]['dropped'][lost['host']]}) and the job went on "
                      f"on golden hosts from {caught[0].get('checkpoint')} (restart recorded in {esc(path)})")
    else:
        console.print(f"  [red]not caught[/]: {lost['host']} was lost, but no restart dropped it ({esc(path)})")
    return bool(caught)


def _preamble(golden: list[str], job: list[str], spares: list[str], s: StageSettings, peak: float) -> None:
    python = os.environ.get(ENV_HOST_PYTHON)
    console.print(f"golden hostfile: {len(golden)} hosts; the job: {', '.join(job)} (one rank each); "
                  f"spares: {', '.join(spares) or 'none'}")
    where = f"the test hosts' Python {esc(python)}" if python else f"this machine's Python {esc(sys.executable)}"
    console.print("[bold]the simulated hosts cannot hold PyTorch: every rank runs on this machine[/] (CPU, gloo), "
                  f"started over SSH by the launcher through each host's own endpoint, with {where}")
    console.print(f"MFU against this machine's single-thread float32 matmul rate, {peak * 1000:.1f} GFLOP/s")
    if s.lose_host is not None:
        console.print(f"injected ({SETTINGS_FILE}): the job's host {s.lose_host.job_host} is lost once rank 0 has "
                      f"logged step {s.lose_host.after_step} (its ranks killed, its SSH endpoint closed)")


def prepare(run_dir: Path) -> tuple[Path, Path]:
    """What the stage needs that no host does, made while site.yml runs: the corpus and its tokenizer (under the
    lab's run directory, beside the job's), and PyTorch imported for the MFU denominator."""
    import torch  # noqa: F401  (imported here so the stage does not wait for it)

    return write_corpus(run_dir / "training-corpus")


def run_training_stage(site_file: str, run_dir: Path, corpus: tuple[Path, Path] | None = None) -> int:
    """The stage: golden hostfile -> `python -m training launch` (supervised) -> what happened, explained.
    0 when the job finished and any injected fault was caught, 1 otherwise. `corpus`: made by `prepare`."""
    started = time.monotonic()
    settings = load_settings(Path(site_file).resolve().parent)
    run = (run_dir / RUN_NAME).resolve()
    shutil.rmtree(run, ignore_errors=True)  # a fresh job each demo (a kept checkpoint would be resumed)
    run.mkdir(parents=True)
    golden = golden_hosts(site_file, run)
    if not golden:
        console.print("[red]no golden hosts: nothing to train on")
        return 1
    job, spares = _hostfiles(run, golden, settings)
    ssh = SshPath(run / "ssh", dict(os.environ))
    peak = cpu_peak_tflops()
    _preamble(golden, job, spares, settings, peak)
    argv = launch_argv(site_file, settings, run, corpus or write_corpus(run / "corpus"), _free_port())
    if not spares:
        i = argv.index("--spares")
        del argv[i:i + 2]
    console.print(f"[dim]{esc(shlex.join(argv[1:]))}")
    env = {**os.environ, **ssh.env(), "OMP_NUM_THREADS": "1", "TRAINING_PEAK_TFLOPS": f"{peak:.6g}"}
    loss = settings.lose_host
    watcher = None
    if loss is not None and loss.job_host <= len(job):
        watcher = LoseHost(loss, job[loss.job_host - 1], run, ssh)
    code = _launch(argv, env, run, watcher)
    caught = explain(run, watcher.report if watcher is not None else {})
    if code != 0:
        console.print(f"[red]the launcher exited {code}[/]: {esc(run / 'launcher.log')}")
    console.print(f"[dim]training stage: {time.monotonic() - started:.1f} s")
    return 0 if code == 0 and caught else 1
