"""The supervisor's health step for real: `provision health --site S` over the SSH host simulator
(sim/sshhosts replaying captured H200 outputs; gpu-0002 replays an Xid 79, critical), on the job's hosts
and the spares, and the restart on the golden ones plus a spare at the same world size; then with the
real training job (DeepSpeed ZeRO-3, gloo): the restart on a spare resumes the same batches exactly, and a
restart on fewer hosts resumes through a universal checkpoint with the uninterrupted losses; the first job's
run also shows ZeRO-3 partitioning parameters and optimizer state over the ranks."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from provision.state import StateStore
from sim.sshhosts.harness import SshLab
from tests.health.conftest import make_sim_site
from tests.training.conftest import free_port, losses_by_attempt, tiny_args
from tests.training.test_supervisor import ScriptedSupervisor, _checkpoint
from training.launcher import Host
from training.supervisor import HealthCommand, Supervisor, provision_health


@contextmanager
def _golden_sim_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
                      ) -> Iterator[tuple[HealthCommand, StateStore]]:
    """`count` golden simulated hosts (gpu-0002 replaying an Xid 79) and the supervisor's health command."""
    site_file, faults = make_sim_site(tmp_path / "site", count, {"gpu-0002": {"fixture": "h200x2-xid79"}})
    db = tmp_path / "state.db"
    with SshLab(site_file, faults, tmp_path / "lab") as lab:
        for k, v in lab.env.items():
            monkeypatch.setenv(k, v)
        from provision.cli import main

        assert main(["status", "--site", str(site_file), "--db", str(db)]) == 0
        store = StateStore(db, actor="test")
        for i in range(1, count + 1):
            store.mark(f"gpu-{i:04d}", "golden", reason="test setup")
        yield provision_health(f"{sys.executable} -m provision health --site {site_file} --db {db} --hosts {{hosts}} "
                               "--level fast --json", timeout_s=120,
                               golden_template=f"{sys.executable} -m provision golden --site {site_file} --db {db} "
                               "--json"), store


def test_a_host_gone_critical_is_replaced_by_a_golden_spare_after_provision_health_over_ssh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _golden_sim_hosts(tmp_path, monkeypatch, 6) as (health, store):
        run = tmp_path / "run"
        _checkpoint(run, 30, ranks=4)
        sup = ScriptedSupervisor([Host(f"gpu-{i:04d}", 1) for i in range(1, 5)], [], run, health,
                                 spares=[Host("gpu-0005", 1), Host("gpu-0006", 1)])
        sup.script = [{"gpu-0002": "exit 1"}, {}]
        assert sup.run() == 0
    events = [json.loads(line) for line in (run / "supervisor.jsonl").read_text().splitlines()]
    restart = events[1]
    assert restart["dropped"] == {"gpu-0002": "critical"} and restart["added"] == ["gpu-0005"]
    assert events[2]["hosts"] == ["gpu-0001", "gpu-0003", "gpu-0004", "gpu-0005"]
    assert restart["resume_step"] == 30 and restart["verdicts"]["gpu-0006"] == "golden"
    assert "gpu_xid" in json.dumps(json.loads((run / "evidence.json").read_text())["health"]["gpu-0002"])
    assert store.get("gpu-0002").state.value == "failed"


@dataclass(frozen=True)
class SimHost(Host):
    """A simulated SSH host whose ranks run on this machine: the simulator answers the health check's SSH
    sessions but runs no torchrun, so the supervisor starts each host's torchrun locally (as it does for a
    local host), under the host's name (TRAINING_HOST)."""

    @property
    def local(self) -> bool:
        return True


@pytest.fixture(scope="module")
def sim_health(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HealthCommand]:
    with pytest.MonkeyPatch.context() as monkeypatch, \
            _golden_sim_hosts(tmp_path_factory.mktemp("sim3"), monkeypatch, 3) as (health, _store):
        yield health


def _supervise(health: HealthCommand, corpus: Path, tok: Path, run: Path, spares: list[Host], sizes: tuple[int, ...]
               ) -> list[dict[str, object]]:
    """The tiny ZeRO-3 job on gpu-0001 and gpu-0002, rank 1 (gpu-0002) killed at step 6, checkpoints every 4."""
    args = [*tiny_args(corpus, tok, run, 8, ckpt_every=4, engine="deepspeed"), "--resize-batch", "keep"]
    sup = Supervisor([SimHost("gpu-0001", 1), SimHost("gpu-0002", 1)], args, run, health, spares=spares,
                     sizes=sizes, engine="deepspeed", rdzv_port=free_port(), grace_s=5,
                     env={"TRAINING_FAULT": "kill:1:6", "OMP_NUM_THREADS": "1"})
    assert sup.run() == 0, (run / "logs").glob("*")
    return [json.loads(line) for line in (run / "supervisor.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def on_spare(sim_health: HealthCommand, corpus: Path, tokenizer_path: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[Path, list[dict[str, object]]]:
    """The job restarted on the spare gpu-0003 (the same world size): its run folder and supervisor events."""
    run = tmp_path_factory.mktemp("same")
    return run, _supervise(sim_health, corpus, tokenizer_path, run, [SimHost("gpu-0003", 1)], ())


def test_zero3_partitions_the_parameters_and_the_optimizer_state_over_the_ranks_and_the_loss_falls(
        on_spare: tuple[Path, list[dict[str, object]]]) -> None:
    """Of the first attempt (2 ranks, steps 1-6): each rank's own optimizer state file, parameters
    partitioned by deepspeed.zero.Init as the model was built."""
    run, _ = on_spare
    ckpt = run / "checkpoints" / "step_00000004"
    assert (ckpt / "COMPLETE").exists()
    assert sorted(p.name for p in ckpt.glob("*zero_pp_rank_*optim_states.pt")) == [
        "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt", "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt"]
    first = losses_by_attempt(run)[0]
    assert first[6] < first[1]
    for rank in (0, 1):
        built = next(r for r in map(json.loads, (run / f"metrics_rank{rank}.jsonl").read_text().splitlines())
                     if r["event"] == "built")
        assert int(built["local_params"]) <= 0.55 * int(built["params"])


def test_a_real_zero3_job_restarts_on_a_spare_with_the_same_batches_and_on_fewer_hosts_through_universal(
        on_spare: tuple[Path, list[dict[str, object]]], sim_health: HealthCommand, corpus: Path, tokenizer_path: Path,
        tmp_path: Path) -> None:
    run, same = on_spare
    assert (same[1]["dropped"], same[1]["added"], same[1]["resume_step"]) == ({"gpu-0002": "critical"}, ["gpu-0003"], 4)
    assert same[2]["hosts"] == ["gpu-0001", "gpu-0003"]
    first, resumed = losses_by_attempt(run)
    assert sorted(first) == [1, 2, 3, 4, 5, 6] and sorted(resumed) == [5, 6, 7, 8]
    for s in (5, 6):  # the same next batches on the same weights: the uninterrupted losses, exactly
        assert resumed[s] == first[s], s

    fewer = _supervise(sim_health, corpus, tokenizer_path, tmp_path / "fewer", [], (1,))
    assert fewer[1]["hosts"] == ["gpu-0001"] and fewer[1]["dropped"] == {"gpu-0002": "critical"}
    first, resumed = losses_by_attempt(tmp_path / "fewer")
    for s in (5, 6):  # one rank runs both old ranks' streams: the 2-rank losses within summation order
        assert resumed[s] == pytest.approx(first[s], rel=1e-4), s
    assert resumed[5] == pytest.approx(losses_by_attempt(run)[0][5], rel=1e-4)
    ckpt = tmp_path / "fewer" / "checkpoints"
    assert (ckpt / "step_00000004" / "universal" / "zero" / "optimizer_state.pt").is_file()
    extra = json.loads((ckpt / "step_00000008" / "extra_rank0.json").read_text())
    assert [s["rank"] for s in extra["loader"]["streams"]] == [0, 1]
