"""The golden-only supervisor: health over job hosts and spares (the stand-in prints provision health's
--json payload, tests/fixtures/training/fake_health.py), refill from spares, stop on a degraded diagnosis
or a hang, refuse restarts that cannot work, and the run's environment on every rank."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from training.launcher import Host, NcclSite, job_env
from training.supervisor import Supervisor, degraded, plan_restart, provision_health

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "training"


def _events(run: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run / "supervisor.jsonl").read_text().splitlines()]


def _checkpoint(run: Path, step: int, ranks: int) -> None:
    ckpt = run / "checkpoints" / f"step_{step:08d}"
    ckpt.mkdir(parents=True)
    for r in range(ranks):
        (ckpt / f"extra_rank{r}.json").write_text(json.dumps({"step": step, "world": ranks}))
    (ckpt / "COMPLETE").write_text("ok\n")


class ScriptedSupervisor(Supervisor):
    """Real attempts (run_attempt's watch loop), each host's command a shell line from `script[attempt]`."""

    script: list[dict[str, str]]

    def commands(self, hosts: Sequence[Host], attempt: int) -> list[tuple[Host, list[str], dict[str, str]]]:
        env = job_env(self.nccl, self.run_dir, attempt, self.env)
        return [(h, ["sh", "-c", self.script[attempt].get(h.name, "exit 0")], env) for h in hosts]


def test_the_health_command_maps_provision_health_json_to_golden_and_keeps_the_failing_checks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_HEALTH_CRITICAL", "b")
    check = provision_health(f"{sys.executable} {FIXTURES / 'fake_health.py'} {{hosts}}")
    assert check(["a", "b"]) == {"a": "golden", "b": "critical"}
    assert check.problems == {"a": {}, "b": {"gpu_xid": "xid_79"}}


def test_a_host_turning_critical_restarts_on_the_other_golden_hosts_plus_a_spare(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_HEALTH_CRITICAL", "b")
    health = provision_health(f"{sys.executable} {FIXTURES / 'fake_health.py'} {{hosts}}")
    _checkpoint(tmp_path, 20, ranks=3)
    sup = ScriptedSupervisor([Host(n, 1) for n in "abc"], [], tmp_path, health, spares=[Host("s1", 1), Host("s2", 1)])
    sup.script = [{"b": "exit 1"}, {}]
    assert sup.run() == 0
    ev = _events(tmp_path)
    assert [e["event"] for e in ev] == ["start", "restart", "start", "finished"]
    assert ev[1]["dropped"] == {"b": "critical"} and ev[1]["added"] == ["s1"] and ev[1]["cause"] == "failed"
    assert ev[1]["checkpoint"] == "step_00000020" and ev[1]["resume_step"] == 20
    assert ev[2]["hosts"] == ["a", "c", "s1"]  # same world size
    assert json.loads((tmp_path / "evidence.json").read_text())["health"] == {"b": {"gpu_xid": "xid_79"}}


def test_a_diagnosed_straggler_stops_the_job_and_the_restart_leaves_its_host_out(tmp_path: Path) -> None:
    row = json.dumps({"kind": "straggler", "alert": True, "hosts": ["b"], "evidence": {"rank": 1}})
    label = json.dumps({"kind": "checkpoint", "alert": False, "hosts": []})
    sup = ScriptedSupervisor([Host(n, 1) for n in "ab"], [], tmp_path, lambda h: dict.fromkeys(h, "golden"),
                             spares=[Host("s1", 1)], grace_s=2)
    sup.script = [{"a": f"echo '{label}' >> {tmp_path}/anomalies.jsonl; echo '{row}' >> {tmp_path}/anomalies.jsonl;"
                        " sleep 30", "b": "sleep 30"}, {}]
    assert sup.run() == 0
    restart = _events(tmp_path)[1]
    assert (restart["cause"], restart["kind"], restart["dropped"], restart["added"]) == \
        ("degraded", "straggler", {"b": "suspect"}, ["s1"])
    assert restart["hosts"] == ["a", "s1"]


def test_a_job_that_writes_no_step_for_hang_s_is_hung_and_restarted(tmp_path: Path) -> None:
    sup = ScriptedSupervisor([Host("a", 1)], [], tmp_path, lambda h: dict.fromkeys(h, "golden"), hang_s=0.5,
                             grace_s=2)
    sup.script = [{"a": "sleep 30"}, {}]
    assert sup.run() == 0
    assert _events(tmp_path)[1]["cause"] == "hung"


def test_deepspeed_on_a_smaller_world_restarts_and_without_universal_checkpoints_is_refused_with_the_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _checkpoint(tmp_path / "ok", 10, ranks=2)
    sup = ScriptedSupervisor([Host("a", 1), Host("b", 1)], [], tmp_path / "ok",
                             lambda h: {"a": "golden", "b": "critical"}, sizes=(1,), engine="deepspeed")
    sup.script = [{"b": "exit 1"}, {}]
    assert sup.run() == 0  # the installed DeepSpeed converts the checkpoint to a universal one on resume
    assert _events(tmp_path / "ok")[1]["hosts"] == ["a"]

    import training.supervisor

    monkeypatch.setattr(training.supervisor, "_universal_support", lambda: "DeepSpeed 0.13.0 has no ZeRO-3 universal")
    _checkpoint(tmp_path, 10, ranks=2)
    sup = ScriptedSupervisor([Host("a", 1), Host("b", 1)], [], tmp_path, lambda h: {"a": "golden", "b": "critical"},
                             sizes=(1,), engine="deepspeed")
    sup.script = [{"b": "exit 1"}]
    assert sup.run() == 1
    last = _events(tmp_path)[-1]
    assert last["event"] == "gave_up" and "saved by 2 ranks, the restart would have 1" in str(last["reason"])
    assert "0.13.0 has no ZeRO-3 universal" in str(last["reason"])
    from training.launch_cli import main

    (tmp_path / "hosts").write_text("a slots=1\n")
    assert main(["--hostfile", str(tmp_path / "hosts"), "--config", "tiny", "--engine", "deepspeed",
                 "--run-dir", str(tmp_path), "--dry-run"]) == 1  # refused: the job cannot be done (exits.py)


def test_an_exit_a_restart_cannot_cure_is_not_retried(tmp_path: Path) -> None:
    checked: list[str] = []

    def health(hosts: Sequence[str]) -> dict[str, str]:
        checked.extend(hosts)
        return dict.fromkeys(hosts, "golden")

    sup = ScriptedSupervisor([Host("a", 1)], [], tmp_path, health)
    sup.script = [{"a": "exit 3"}]
    assert sup.run() == 1
    assert "memory plan does not fit" in str(_events(tmp_path)[-1]["reason"]) and checked == []


def test_the_measured_runs_environment_reaches_remote_ranks_and_secrets_do_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    monkeypatch.setenv("TRAINING_API_KEY", "k")
    sup = Supervisor([Host("gpu-a", 8), Host("gpu-b", 8)], [], tmp_path, lambda h: {}, NcclSite(),
                     env={"OMP_NUM_THREADS": "4"})
    for host, cmd, _ in sup.commands(sup.hosts, 0):
        remote = cmd[-1]
        assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in remote and "OMP_NUM_THREADS=4" in remote
        assert f"TRAINING_HOST={host.name}" in remote and "hf_secret" not in remote and "TRAINING_API_KEY" not in remote


def test_restart_plans_refill_from_spares_or_shrink_to_an_allowed_size() -> None:
    v = {"a": "golden", "b": "golden", "c": "critical", "d": "golden", "s": "unhealthy"}
    assert plan_restart("abcd", ["s"], v, (), 4, (2,)).hosts == ["a", "b"]
    assert plan_restart("abc", ["s", "d"], v, (), 3, ()).hosts == ["a", "b", "d"]
    assert plan_restart("abc", [], v, ("a",), 3, ()).refused == "1 golden host(s), the config allows []"


def test_only_alerts_of_curable_kinds_with_a_suspect_stop_a_job(tmp_path: Path) -> None:
    rows = [{"kind": "checkpoint", "alert": False, "hosts": []}, {"kind": "gc_decline", "alert": True, "hosts": []},
            {"kind": "random_stalls", "alert": False, "hosts": []}]
    (tmp_path / "anomalies.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert degraded(tmp_path, 0) == (None, 3)
