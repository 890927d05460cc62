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
from training.launcher import Host
from training.supervisor import Supervisor
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


def test_a_real_torchrun_whose_worker_exits_1_goes_on_to_a_restart(tmp_path: Path) -> None:
    """An unknown model: the worker's refusal exits 1 (training/exits.py), a code NO_RETRY does not hold. The
    supervisor checks the hosts for the restart (which finds none golden, so no second torchrun is paid for)."""
    checked: list[str] = []
    assert _supervisor(tmp_path, ["--config", "no_such_model"], checked).run() == 1
    events = _events(tmp_path)
    assert [e["event"] for e in events] == ["start", "gave_up"] and checked == ["127.0.0.1"]
    assert events[1]["worker_exits"] == {"127.0.0.1": 1}
    assert events[1]["reason"] == "0 golden host(s), the config allows []"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
