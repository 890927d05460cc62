"""`python -m training launch --scheduler slurm`: the batch script it writes for a site, what that script does
when a step fails (Slurm's commands stood in for), and the real thing: the tiny job (CPU, gloo) under a real
Slurm 22.05 (sim/slurm/lab.py: munged, slurmctld, one slurmd per node) losing a node after a checkpoint, requeued
on the surviving node plus the spare, resuming with the uninterrupted run's losses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.training.conftest import REPO, free_port, losses_by_attempt, step_records, tiny_args, torchrun_cmd
from tests.training.slurm_standins import run_batch_script
from tests.waiting import wait_until
from training.launch_cli import main as launch

STEPS, EVERY = 12, 4

needs_slurm = pytest.mark.skipif(
    shutil.which("slurmctld") is None or shutil.which("munged") is None or os.geteuid() != 0,
    reason="needs Debian's slurmctld, slurmd and munge (deps/apt/slurm.txt) and root (the lab's daemons run as root)")

SITE = """
nccl:
  ib_hca: mlx5_0,mlx5_3
  socket_ifname: bond0
  env: {NCCL_NVLS_ENABLE: "0"}
slurm:
  cluster_name: lab
  controller: ctl-01
  partitions:
    - {name: cpu, classes: [cpu]}
    - {name: gpu, classes: [hgx-h200], default: true}
"""


@pytest.fixture
def script(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
           ) -> Callable[..., str]:
    """The batch script `launch --scheduler slurm --dry-run` prints for SITE, a secret in the launcher's environment."""
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    site = tmp_path / "site.yml"
    site.write_text(SITE)

    def render(*args: str) -> str:
        capsys.readouterr()
        assert launch(["--scheduler", "slurm", "--site", str(site), "--config", "llama3_70b", "--nodes", "4",
                       "--dry-run", *args]) == 0, capsys.readouterr().err
        return capsys.readouterr().out

    return render


def test_the_batch_script_asks_for_whole_nodes_of_the_sites_partition_requeues_and_runs_one_torchrun_per_node(
        script: Callable[..., str]) -> None:
    text = script("--job-name", "llama", "--run-dir", "/shared/runs/70b-{job_id}", "--gres", "gpu:8",
                   "--rdzv-port", "29555", "--max-restarts", "5", "--node-check", "provision health --hosts {nodes}",
                   "--env", "OMP_NUM_THREADS=4", "--", "--steps", "100")
    directives = [line.removeprefix("#SBATCH ") for line in text.splitlines() if line.startswith("#SBATCH ")]
    assert directives == ["--job-name=llama", "--nodes=4", "--ntasks-per-node=1", "--exclusive", "--requeue",
                          "--open-mode=append", "--output=/shared/runs/llama-%j.out", "--partition=gpu", "--gres=gpu:8"]
    assert 'RUN_DIR=/shared/runs/70b-"$SLURM_JOB_ID"' in text  # the job id survives requeues: one run dir
    for line in ("export NCCL_IB_HCA=mlx5_0,mlx5_3", "export NCCL_SOCKET_IFNAME=bond0", "export NCCL_NVLS_ENABLE=0",
                 "export OMP_NUM_THREADS=4", 'export TRAINING_ATTEMPT="$ATTEMPT"',
                 'ATTEMPT="${SLURM_RESTART_COUNT:-0}"'):
        assert line in text.splitlines(), line
    assert "hf_secret" not in text and "HF_TOKEN" not in text
    assert "scontrol show hostnames \"$SLURM_JOB_NODELIST\"" in text and "NodeAddr=" in text
    srun = text[text.index("srun "):text.index("rc=$?")]
    assert "--ntasks-per-node=1" in srun and "--kill-on-bad-exit=1" in srun
    assert '--node-rank="$SLURM_NODEID" --rdzv-conf=is_host=$(( SLURM_NODEID == 0 ))' in srun
    for arg in ("--nnodes=4", "--nproc-per-node=8", '--rdzv-endpoint="$RDZV_HOST:29555"', "--rdzv-backend=c10d",
                '--run-dir "$RUN_DIR"', "--config llama3_70b", "--steps 100"):
        assert arg in srun, arg
    tail = text[text.index("rc=$?"):]
    assert '[ "$ATTEMPT" -ge 5 ]' in tail and 'provision health --hosts "$NODES"' in tail
    assert tail.index("provision health") < tail.index('scontrol requeue "$SLURM_JOB_ID"')
    assert subprocess.run(["bash", "-n"], input=text, text=True, check=False).returncode == 0


def test_options_of_the_other_scheduler_and_bad_names_are_refused(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "hosts").write_text("a slots=1\n")
    base = ["--scheduler", "slurm", "--config", "tiny", "--dry-run"]
    assert launch([*base, "--nodes", "2", "--hostfile", str(tmp_path / "hosts")]) == 1
    assert "--hostfile is for --scheduler ssh" in capsys.readouterr().err
    assert launch([*base]) == 1 and "needs --nodes" in capsys.readouterr().err
    assert launch([*base, "--nodes", "2", "--partition", "gpu;rm"]) == 1
    assert "not a Slurm partition name" in capsys.readouterr().err
    assert launch([*base, "--nodes", "2", "--run-dir", "/r/{job_id}/x"]) == 1
    assert "must exist when the job starts" in capsys.readouterr().err
    assert launch(["--config", "tiny", "--nodes", "2", "--hostfile", str(tmp_path / "hosts"), "--dry-run"]) == 1
    assert "for --scheduler slurm" in capsys.readouterr().err


CASES = """\
  "scontrol show hostnames") printf 'gpu-a\\ngpu-b\\n' ;;
  "scontrol show node") echo "NodeName=$3 Arch=x86_64 CoresPerSocket=1"; echo "   NodeAddr=10.1.0.7 NodeHostName=$3" ;;
  "scontrol requeue"*) kill -TERM "$PPID" ;;  # slurmctld ends the batch script as it requeues the job
  "srun "*) exit 1 ;;
  "sinfo "*) echo "drained|bringup-check: xid_79 (2026-12-05 03:12)" ;;
"""


def _run_script(tmp_path: Path, script: Callable[..., str], restart_count: int | None
                ) -> tuple[int, list[str], list[dict[str, Any]]]:
    """The rendered script under bash, srun failing, with stand-ins for scontrol/srun/sinfo on PATH."""
    run = tmp_path / "run"
    text = script("--run-dir", str(run), "--max-restarts", "2", "--workdir", str(REPO),
                  "--node-check", "echo check {nodes} >> $STUB_LOG")
    env = {} if restart_count is None else {"SLURM_RESTART_COUNT": str(restart_count)}
    done = run_batch_script(text, tmp_path, run, CASES, env)
    return done.returncode, done.calls, done.events


def test_a_failed_step_runs_the_node_check_then_requeues_and_the_restart_limit_gives_up(
        tmp_path: Path, script: Callable[..., str]) -> None:
    rc, calls, events = _run_script(tmp_path, script, None)
    srun = next(c for c in calls if c.startswith("srun "))
    assert "--rdzv-endpoint=10.1.0.7:29500" in srun and "--rdzv-id=bringup-train-41-0" in srun
    assert calls[-2:] == ["check gpu-a,gpu-b", "scontrol requeue 41"] and rc == -15
    assert [(e["event"], e["attempt"]) for e in events] == [("start", 0), ("requeue", 0)]
    assert events[0]["hosts"] == ["gpu-a", "gpu-b"] and events[1]["exit_code"] == 1

    rc, calls, events = _run_script(tmp_path, script, 2)  # requeued twice already: --max-restarts 2 reached
    assert rc == 1 and not any(c.startswith(("scontrol requeue", "check")) for c in calls)
    restart = events[2]
    assert (restart["event"], restart["attempt"], restart["cause"], restart["exit_code"]) == ("restart", 2, "failed", 1)
    assert restart["dropped"] == {} and restart["added"] == []
    assert [e["event"] for e in events[3:]] == ["start", "gave_up"]


@needs_slurm
def test_a_job_that_loses_a_node_after_a_checkpoint_is_requeued_on_the_spare_and_gives_the_uninterrupted_losses(
        corpus: Path, tokenizer_path: Path, tmp_path: Path) -> None:
    from sim.slurm.faults import lose_node
    from sim.slurm.lab import Partition, SlurmLab, SlurmLabSpec

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    straight = tmp_path / "straight"  # the uninterrupted run, meanwhile (the requeue leaves the CPUs idle)
    reference = subprocess.Popen(
        torchrun_cmd(2, straight / "torchelastic", "-m", "training", "train",
                     *tiny_args(corpus, tokenizer_path, straight, STEPS, EVERY)), cwd=REPO, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    nodes = ("gpu-0001", "gpu-0002", "gpu-0003")
    # SlurmdTimeout 15 s: a loaded 2-core CI machine must not see a live slurmd miss its pings (5 s did, once)
    lab = SlurmLab(tmp_path / "slurm", SlurmLabSpec(
        "lab", nodes, (Partition("gpu", nodes, True),), slurmd_timeout_s=15, cred_expire_s=5,
        extra=("SchedulerParameters=sched_interval=1,bf_interval=1",)))
    train = tiny_args(corpus, tokenizer_path, tmp_path / "unused", STEPS, EVERY)[6:]  # no --config/--engine/--run-dir
    with lab.running():
        env.update(lab.env())
        out = subprocess.run(
            [sys.executable, "-m", "training", "launch", "--scheduler", "slurm", "--nodes", "2", "--partition", "gpu",
             "--gpus-per-host", "1", "--config", "tiny", "--run-dir", str(tmp_path / "runs" / "tiny-{job_id}"),
             "--rdzv-port", str(free_port()), "--max-restarts", "2", "--env", "OMP_NUM_THREADS=1",
             # 0.6 s more per step on the first attempt only: the node is lost before the next checkpoint
             "--env", "TRAINING_INJECT=stall:*:1.0:0.6", "--", *train],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert out.returncode == 0, out.stderr
        job = out.stdout.split()[3].rstrip(":")
        run = tmp_path / "runs" / f"tiny-{job}"

        def scontrol(*args: str) -> str:
            return subprocess.run(["scontrol", *args], env=env, capture_output=True, text=True, timeout=30,
                                  check=False).stdout

        def said() -> str:  # what to look at when a wait runs out
            logs = sorted((run / "logs").glob("*.log")) if (run / "logs").is_dir() else []
            outs = sorted((tmp_path / "runs").glob("*.out"))
            daemons = sorted((tmp_path / "slurm" / "log").glob("*.log"))
            return (scontrol("show", "job", job) + "".join(f"\n--- {p.name}\n" + p.read_text()[-1500:]
                                                          for p in [*outs, *logs, *daemons]))

        try:
            wait_until("the first checkpoint", lambda: (run / "checkpoints" / f"step_{EVERY:08d}" / "COMPLETE").exists(),
                  150)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{said()}") from None
        allocated = scontrol("show", "hostnames", scontrol("show", "job", job).split(" NodeList=")[1].split()[0])
        lost = allocated.split()[1]
        assert lose_node(lab, lost)
        wait_until("the requeued job's end", lambda: "JobState=COMPLETED" in scontrol("show", "job", job), 240)
        assert "Restarts=1" in scontrol("show", "job", job)
    assert reference.wait(timeout=240) == 0, reference.stderr.read() if reference.stderr else ""

    events = [json.loads(line) for line in (run / "supervisor.jsonl").read_text().splitlines()]
    # Who requeues is a race: Slurm, once it marks the lost node down, or the script, when srun ends first
    # (--kill-on-bad-exit) and it requeues itself (a `requeue` record of attempt 0, then cause "failed").
    events = [e for e in events if e["event"] != "requeue"]
    assert [(e["event"], e["attempt"]) for e in events] == [("start", 0), ("restart", 1), ("start", 1), ("finished", 1)]
    restart = events[1]
    spare = next(n for n in nodes if n not in allocated.split())
    assert restart["cause"] in ("requeued", "failed") and restart["added"] == [spare]
    assert list(restart["dropped"]) == [lost]
    assert (restart["checkpoint"], restart["resume_step"]) == (f"step_{EVERY:08d}", EVERY)
    assert events[2]["hosts"] == sorted({*allocated.split(), spare} - {lost})
    first, resumed = losses_by_attempt(run)
    assert max(first) < 2 * EVERY and sorted(resumed) == list(range(EVERY + 1, STEPS + 1))  # the same next batch
    a, b = step_records(straight), step_records(run)
    for s in range(1, STEPS + 1):
        assert b[s]["loss"] == pytest.approx(a[s]["loss"], abs=1e-6), s
        assert b[s]["grad_norm"] == pytest.approx(a[s]["grad_norm"], abs=1e-6), s
    logs = sorted(p.name for p in (run / "logs").iterdir())  # one per node and attempt, named by the node
    assert logs == sorted([f"attempt0_{n}.log" for n in allocated.split()] +
                          [f"attempt1_{n}.log" for n in events[2]["hosts"]])
