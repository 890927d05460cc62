"""The demo's training stage (sim/demo_training.py): the tiny model on the golden hostfile through the real
launcher and its golden-only supervisor, every rank on this machine over each simulated host's SSH endpoint,
and the injected host loss caught, restarted on golden hosts and explained. The demo's own run (the session's
`demo_run`) is judged against what the site's training-demo.yml asked for; the parsing, the SSH view and the
explanation are checked on their own. Stand-ins: the lab's SSH hosts (sim/sshhosts or the test hosts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provision.command.output import console
from provision.state import State, StateStore
from sim.demo_training import RUN_NAME, explain, load_settings
from sim.demo_training_ssh import SshPath
from tests.demo_run import DemoRun


def _events(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_demo_trains_on_golden_hosts_and_restarts_without_the_host_it_lost(demo_run: DemoRun) -> None:
    assert demo_run.returncode == 0, demo_run.stdout[-3000:]
    settings = load_settings(demo_run.site.parent)
    assert settings.lose_host is not None, "the embedded site injects a host loss"
    run = demo_run.site.parent / "state" / "lab" / RUN_NAME
    stage = " ".join(demo_run.stdout[demo_run.stdout.index("Train the tiny model"):].split())  # unwrapped
    assert "every rank runs on this machine" in stage
    job = [line.split()[0] for line in (run / "job.txt").read_text().splitlines()]
    spares = [line.split()[0] for line in (run / "spares.txt").read_text().splitlines()]
    golden = [line.split()[0] for line in (run / "golden.txt").read_text().splitlines()]
    assert job + spares == golden and len(job) == settings.job_hosts
    lost = job[settings.lose_host.job_host - 1]

    events = _events(run / "supervisor.jsonl")
    assert [e["event"] for e in events] == ["start", "restart", "start", "finished"]
    restart = events[1]
    assert restart["dropped"] == {lost: "unknown"} and restart["added"] == spares[:1]
    assert events[2]["hosts"] == [h for h in job if h != lost] + spares[:1]
    assert isinstance(restart["resume_step"], int) and restart["resume_step"] % settings.checkpoint_every == 0
    assert 0 < restart["resume_step"] <= settings.lose_host.after_step + settings.checkpoint_every
    assert "caught" in stage and f"{lost} was lost after step" in stage

    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    rank0 = {r["step"]: r for r in steps if r.get("event") == "step" and r["rank"] == 0}
    assert sorted(rank0) == list(range(1, settings.steps + 1))
    assert rank0[settings.steps]["loss"] < rank0[1]["loss"] and all(r["mfu"] > 0 for r in rank0.values())
    store = StateStore(demo_run.site.parent / "state" / "lab" / "demo.db")
    assert store.get(lost).state is State.failed and store.get(lost).reason == "ssh_refused"
    assert all(store.get(h).state is State.golden for h in events[2]["hosts"])


def test_settings_come_from_the_file_beside_the_site_and_bad_values_are_refused(tmp_path: Path) -> None:
    assert load_settings(tmp_path).lose_host is None, "no file: a clean run"
    (tmp_path / "training-demo.yml").write_text("steps: 6\nfaults:\n  lose_host: {job_host: 1, after_step: 3}\n")
    got = load_settings(tmp_path)
    assert got.steps == 6 and got.lose_host is not None and got.lose_host.after_step == 3
    for bad in ("steps: 0\n", "job_hosts: two\n", "faults: {lose_host: 3}\n", "- a list\n"):
        (tmp_path / "training-demo.yml").write_text(bad)
        with pytest.raises(ValueError):
            load_settings(tmp_path)


def test_the_ssh_view_names_every_hosts_endpoint_and_a_cut_host_points_at_a_closed_port(tmp_path: Path) -> None:
    amap = tmp_path / "addresses.json"
    amap.write_text(json.dumps({"gpu-a": "127.0.0.1:2222", "gpu-b": "127.0.0.1:2223"}))
    env = {"BRINGUP_SSH_ADDRESS_MAP": str(amap), "BRINGUP_SSH_KEY_FILE": "/k", "BRINGUP_SSH_KNOWN_HOSTS": "/kh"}
    ssh = SshPath(tmp_path / "ssh", env)
    config = (tmp_path / "ssh" / "ssh_config").read_text()
    assert "Host gpu-b\n  HostName 127.0.0.1\n  Port 2223\n  IdentityFile /k\n  UserKnownHostsFile /kh" in config
    assert f"-F {tmp_path / 'ssh' / 'ssh_config'} \"$@\"" in (tmp_path / "ssh" / "bin" / "ssh").read_text()
    endpoint = ssh.cut("gpu-b")
    assert endpoint != "127.0.0.1:2223" and json.loads(amap.read_text())["gpu-b"] == "127.0.0.1:2223"
    assert json.loads(Path(ssh.env()["BRINGUP_SSH_ADDRESS_MAP"]).read_text())["gpu-b"] == endpoint
    assert f"Port {endpoint.rpartition(':')[2]}" in (tmp_path / "ssh" / "ssh_config").read_text()
    with pytest.raises(RuntimeError, match="BRINGUP_SSH_KEY_FILE"):
        SshPath(tmp_path / "other", {"BRINGUP_SSH_ADDRESS_MAP": str(amap)})


def test_a_lost_host_no_restart_dropped_is_reported_not_caught(tmp_path: Path) -> None:
    rows = [{"event": "start", "attempt": 0, "hosts": ["a", "b"]},
            {"event": "restart", "attempt": 1, "cause": "failed", "failed": {"b": 137}, "verdicts": {"a": "golden"},
             "dropped": {"b": "unknown"}, "added": ["c"], "checkpoint": "step_00000004", "resume_step": 4}]
    (tmp_path / "supervisor.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with console.capture() as out:
        assert explain(tmp_path, {"host": "b", "at_step": 6})
        assert not explain(tmp_path, {"host": "a", "at_step": 6})
    said = out.get()
    assert "dropped b (unknown); added c; resumes from step_00000004 (step 4)" in said
    assert "caught" in said and "not caught" in said
    gave_up = {"event": "gave_up", "attempt": 0, "cause": "failed", "dropped": {"b": "unknown"},
               "reason": "1 golden host(s), the config allows []"}
    (tmp_path / "supervisor.jsonl").write_text(json.dumps(rows[0]) + "\n" + json.dumps(gave_up) + "\n")
    with console.capture() as out:
        assert not explain(tmp_path, {"host": "b", "at_step": 6})
    assert "caught, but the job could not go on" in out.get() and "the config allows []" in out.get()
