"""The worker's exit code reaches the supervisor through torchrun (training/torchrun_report.py): torchrun exits 1
whenever a worker fails (its elastic agent raises ChildFailedError), so a memory plan that does not fit (the worker's
3) was restarted max_restarts times. The worker's code is read from the failure summary torchrun prints last
(torch/distributed/elastic/multiprocessing/errors/__init__.py, `_MSG_FORMAT_TEMPLATE`; SUMMARY below is what
torch 2.13's torchrun printed for a tiny-model worker whose plan refused, pid and time as printed)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.training.conftest import REPO, free_port
from tests.training.slurm_standins import run_batch_script
from training.launcher import Host
from training.slurm_launch import SlurmJob, render_sbatch
from training.supervisor import Supervisor
from training.torchrun_report import main as report_main
from training.torchrun_report import root_cause_exit, tail_since, worker_exit

SUMMARY = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\x20
============================================================
training FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-06_10:30:07
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 3 (pid: 2085)\x20
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def test_the_root_cause_exit_code_is_read_from_torchruns_last_whole_summary() -> None:
    assert root_cause_exit(SUMMARY) == 3
    assert root_cause_exit(SUMMARY.replace("\n", "\r\n")) == 3  # through `ssh -tt`, a terminal's line ends
    killed = SUMMARY.replace("exitcode  : 3 (pid: 2085)", "exitcode  : -9 (pid: 2085) Signal 9 (SIGKILL)")
    assert root_cause_exit(SUMMARY + killed) == -9  # the last summary counts
    assert root_cause_exit(SUMMARY[:SUMMARY.rindex("\n=")]) is None  # cut off before its border: unknown
    assert root_cause_exit("rank 0: exitcode  : 3 (pid: 1)\n") is None  # no summary, no code
    assert root_cause_exit(SUMMARY.replace("exitcode  : 3", "exitcode  : three")) is None


def test_only_what_the_attempt_wrote_and_only_a_torchrun_that_failed_is_read(tmp_path: Path) -> None:
    log = tmp_path / "attempt0_a.log"
    log.write_text(SUMMARY)
    start = log.stat().st_size
    assert worker_exit(1, log, 0) == 3 and worker_exit(1, log, start) is None  # an earlier run's summary
    assert worker_exit(255, log, 0) is None  # ssh's own failure, not torchrun's
    log.write_text("x" * 100_000 + SUMMARY)
    assert len(tail_since(log, 0, 1000)) == 1000 and worker_exit(1, log, 0) == 3
    assert worker_exit(1, tmp_path / "absent.log", 0) is None


def _events(run: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run / "supervisor.jsonl").read_text().splitlines()]


def _supervisor(run: Path, train_args: list[str], checked: list[str]) -> Supervisor:
    def health(hosts: Sequence[str]) -> dict[str, str]:  # nothing to restart on: a restart is planned, not run
        checked.extend(hosts)
        return dict.fromkeys(hosts, "critical")

    return Supervisor([Host("127.0.0.1", 1)], ["--run-dir", str(run), *train_args], run, health, max_restarts=3,
                      rdzv_port=free_port(), workdir=REPO, grace_s=5, env={"OMP_NUM_THREADS": "1"})


@pytest.fixture(autouse=True)
def _importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))


def test_a_real_torchrun_whose_memory_plan_refuses_is_given_up_at_once_with_the_plan_as_reason(
        tmp_path: Path) -> None:
    checked: list[str] = []
    sup = _supervisor(tmp_path, ["--config", "tiny", "--synthetic", "--gpu-mem", "0.001", "--micro-batch", "4"],
                      checked)
    assert sup.run() == 1
    events = _events(tmp_path)
    assert [e["event"] for e in events] == ["start", "gave_up"] and checked == []  # no health check, no restart
    assert events[1]["failed"] == {"127.0.0.1": 1}  # torchrun's own code ...
    assert events[1]["worker_exits"] == {"127.0.0.1": 3}  # ... and its worker's, from torchrun's summary
    assert "memory plan does not fit" in str(events[1]["reason"])


def test_a_real_torchrun_whose_worker_is_configured_wrong_is_not_retried_and_leaves_nothing_in_tmp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unknown model: the worker exits 2 (training/train.py), the same on every restart. The launch leaves
    nothing in the temporary directory, where torchrun's agent would make a torchelastic_* folder for each
    launch (torch/distributed/elastic/multiprocessing/api.py, DefaultLogsSpecs): its files are in the run's."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    checked: list[str] = []
    assert _supervisor(tmp_path, ["--config", "no_such_model"], checked).run() == 1
    events = _events(tmp_path)
    assert [e["event"] for e in events] == ["start", "gave_up"] and checked == []  # no health check, no restart
    assert events[1]["worker_exits"] == {"127.0.0.1": 2}
    assert "the arguments or the configuration are wrong" in str(events[1]["reason"])
    assert list(tmp.iterdir()) == [] and (tmp_path / "torchelastic").is_dir()


def test_a_real_torchrun_whose_worker_dies_goes_on_to_a_restart(tmp_path: Path) -> None:
    """A rank killed (the kill drill, SIGKILL after step 1): a code NO_RETRY does not hold. The supervisor checks
    the hosts for the restart (which finds none golden, so no second torchrun is paid for)."""
    checked: list[str] = []
    assert _supervisor(tmp_path, ["--config", "tiny", "--synthetic", "--drill", "kill:0:1"],
                       checked).run() == 1
    events = _events(tmp_path)
    assert [e["event"] for e in events] == ["start", "gave_up"] and checked == ["127.0.0.1"]
    assert events[1]["worker_exits"] == {"127.0.0.1": -9}
    assert events[1]["reason"] == "0 golden host(s), the config allows []"


def test_the_report_command_names_a_worker_exit_no_restart_cures_and_is_silent_otherwise(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "attempt0_a.log").write_text(SUMMARY.replace("exitcode  : 3", "exitcode  : 1"))
    (tmp_path / "attempt0_b.log").write_text(SUMMARY)
    assert report_main([str(tmp_path / "attempt0_a.log"), str(tmp_path / "absent.log")]) == 0
    assert capsys.readouterr().out == ""
    assert report_main([str(tmp_path / "attempt0_a.log"), str(tmp_path / "attempt0_b.log")]) == 0
    assert "exit code 3 of a worker (attempt0_b.log): the memory plan does not fit" in capsys.readouterr().out


# srun's node gpu-a leaves torchrun's summary of a worker that exited 3 in its node log, as NODE_LAUNCH's redirect
# would, and fails (tests/training/slurm_standins.py runs the script).
CASES = """\
  "scontrol show hostnames") printf 'gpu-a\\ngpu-b\\n' ;;
  "scontrol show node") echo "   NodeAddr=10.1.0.7 NodeHostName=$3" ;;
  "srun "*) cat "$SUMMARY_FILE" >> "${BRINGUP_NODE_LOG}gpu-a.log"; exit 1 ;;
"""


def test_the_slurm_batch_script_gives_up_without_a_node_check_or_requeue_when_a_workers_plan_does_not_fit(
        tmp_path: Path) -> None:
    run = tmp_path / "run"
    (tmp_path / "summary").write_text(SUMMARY)
    text = render_sbatch(SlurmJob(nodes=2, gpus_per_node=1, run_dir=str(run), train_args=("--config", "tiny"),
                                  python=sys.executable, workdir=str(REPO), max_restarts=2,
                                  node_check="echo check {nodes} >> $STUB_LOG"))
    done = run_batch_script(text, tmp_path, run, CASES, {"SUMMARY_FILE": str(tmp_path / "summary")})
    calls, events = done.calls, done.events
    assert done.returncode == 1 and not any(c.startswith(("scontrol requeue", "check")) for c in calls), calls
    assert [e["event"] for e in events] == ["start", "gave_up"]
    assert "exit code 3 of a worker (attempt0_gpu-a.log): the memory plan does not fit" in events[1]["reason"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
