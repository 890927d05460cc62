from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from training.launcher import (
    Host,
    LaunchError,
    NcclSite,
    hcas_from_fabric_design,
    job_env,
    load_nccl_site,
    parse_hostfile,
)
from training.supervisor import Supervisor, provision_health


def test_hostfile_deepspeed_and_plain_lines() -> None:
    hosts = parse_hostfile("# golden set\ngpu-r1-01 slots=8\ngpu-r1-02\n\n", default_slots=4)
    assert hosts == [Host("gpu-r1-01", 8), Host("gpu-r1-02", 4)]
    with pytest.raises(LaunchError, match="twice"):
        parse_hostfile("a\na\n", 8)
    with pytest.raises(LaunchError, match="cannot read"):
        parse_hostfile("a gpus=8\n", 8)


def test_site_nccl_settings_and_flight_recorder_reach_every_rank(tmp_path: Path) -> None:
    site = tmp_path / "site.yml"
    site.write_text("nccl:\n  ib_hca: mlx5_0,mlx5_3\n  gdr_level: PHB\n  socket_ifname: bond0\n"
                    "  env: {NCCL_IB_TIMEOUT: '22'}\n")
    env = job_env(load_nccl_site(site), tmp_path / "run", attempt=2)
    assert env["NCCL_IB_HCA"] == "mlx5_0,mlx5_3" and env["NCCL_NET_GDR_LEVEL"] == "PHB"
    assert env["NCCL_SOCKET_IFNAME"] == "bond0" and env["NCCL_IB_TIMEOUT"] == "22"
    assert env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1" and env["TORCH_FR_BUFFER_SIZE"] == "2000"
    assert env["TRAINING_ATTEMPT"] == "2"
    with pytest.raises(LaunchError):
        NcclSite.from_mapping({"ib_hcas": "x"})


def test_remote_hosts_get_torchrun_over_ssh_with_c10d_rendezvous_on_the_first(tmp_path: Path) -> None:
    sup = Supervisor([Host("gpu-a", 8), Host("gpu-b", 8)], ["--config", "llama3_70b"], tmp_path, lambda h: {},
                     python="python3", workdir=Path("/srv/bringup"))
    (_, cmd_a, _), (_, cmd_b, _) = sup.commands(sup.hosts, attempt=1)
    assert cmd_a[:2] == ["ssh", "-tt"] and cmd_a[-2] == "gpu-a"
    remote = cmd_b[-1]
    assert remote.startswith("cd /srv/bringup && env ")
    for part in ("--nnodes=2", "--nproc-per-node=8", "--node-rank=1", "--rdzv-backend=c10d",
                 "--rdzv-endpoint=gpu-a:29500", "--rdzv-id=bringup-train-1", "--max-restarts=0", "TRAINING_ATTEMPT=1"):
        assert part in remote


class FakeSupervisor(Supervisor):
    """Attempts scripted: each call returns the next host -> exit code mapping."""

    script: list[dict[str, int]]

    def run_attempt(self, hosts: Sequence[Host], attempt: int) -> dict[str, int]:
        codes = self.script[attempt]
        return {h.name: codes.get(h.name, 0) for h in hosts}


def _events(run: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run / "supervisor.jsonl").read_text().splitlines()]


def test_failure_reruns_health_and_restarts_on_the_golden_hosts_only(tmp_path: Path) -> None:
    checked: list[list[str]] = []

    def health(hosts: Sequence[str]) -> dict[str, str]:
        checked.append(list(hosts))
        return {"a": "golden", "b": "critical", "c": "unhealthy"}  # d missing: unknown

    sup = FakeSupervisor([Host(n, 8) for n in "abcd"], [], tmp_path, health, max_restarts=2, sizes=(1,))
    sup.script = [{"b": 1}, {}]
    assert sup.run() == 0
    assert checked == [["a", "b", "c", "d"]]
    ev = _events(tmp_path)
    assert [e["event"] for e in ev] == ["start", "restart", "start", "finished"]
    assert ev[1]["dropped"] == {"b": "critical", "c": "unhealthy", "d": "unknown"} and ev[1]["cause"] == "failed"
    assert ev[2]["hosts"] == ["a"]


def test_restarts_are_bounded(tmp_path: Path) -> None:
    sup = FakeSupervisor([Host("a", 8)], [], tmp_path, lambda h: {"a": "golden"}, max_restarts=1)
    sup.script = [{"a": 1}, {"a": 1}]
    assert sup.run() == 1
    assert [e["event"] for e in _events(tmp_path)] == ["start", "restart", "start", "gave_up"]


def test_gives_up_when_the_golden_hosts_fill_no_allowed_size(tmp_path: Path) -> None:
    sup = FakeSupervisor([Host("a", 8), Host("b", 8)], [], tmp_path, lambda h: {"a": "critical", "b": "golden"},
                         max_restarts=3, sizes=(2,))
    sup.script = [{"a": 1}]
    assert sup.run() == 1
    last = _events(tmp_path)[-1]
    assert last["event"] == "gave_up" and "the config allows [2]" in str(last["reason"])


def test_a_health_check_past_its_timeout_is_killed_and_every_host_counts_as_unknown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pidfile = tmp_path / "health.pid"
    health = provision_health(f"""sh -c 'echo $$ > "$0"; exec sleep 600' {pidfile} {{hosts}}""", timeout_s=0.5)
    sup = FakeSupervisor([Host("a", 8), Host("b", 8)], [], tmp_path, health, max_restarts=3)
    sup.script = [{"a": 1}]
    assert sup.run() == 1  # the supervisor carries on: no usable host left, so it gives up cleanly
    last = _events(tmp_path)[-1]
    assert last["event"] == "gave_up" and last["dropped"] == {"a": "unknown", "b": "unknown"}
    assert "the config allows []" in str(last["reason"])
    assert "health check still running after 0.5 s, killed" in capsys.readouterr().err
    with pytest.raises(ProcessLookupError):
        os.kill(int(pidfile.read_text()), 0)


def test_ib_hcas_come_from_the_fabric_design_of_the_job_hosts(tmp_path: Path) -> None:
    design = tmp_path / "design.yml"
    design.write_text('fabric: "t"\nhosts:\n'
                      '  - {"name": "gpu-a", "hcas": ["mlx5_0", "mlx5_1", "mlx5_2"]}\n'
                      '  - {"name": "gpu-b", "hcas": ["mlx5_0", "mlx5_2"]}\n')
    assert hcas_from_fabric_design(design, ["gpu-a", "gpu-b"]) == "mlx5_0,mlx5_2"
    assert hcas_from_fabric_design(design, ["gpu-a"]) == "mlx5_0,mlx5_1,mlx5_2"
    assert hcas_from_fabric_design(design, ["other"]) is None


def test_launch_dry_run_prints_one_command_per_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from training.launch_cli import main

    hostfile = tmp_path / "golden"
    hostfile.write_text("gpu-r1-01 slots=8\ngpu-r1-02 slots=8\n")
    design = tmp_path / "design.yml"  # the shape `fabric design generate` writes
    design.write_text('hosts:\n  - {"name": "gpu-r1-01", "hcas": ["mlx5_0", "mlx5_1"], "rack": "r1"}\n'
                      '  - {"name": "gpu-r1-02", "hcas": ["mlx5_0", "mlx5_1"], "rack": "r1"}\n')
    args = ["--hostfile", str(hostfile), "--config", "llama3_70b", "--engine", "deepspeed", "--dry-run",
            "--run-dir", str(tmp_path / "run"), "--fabric-design", str(design)]
    assert main([*args, "--", "--steps", "100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["gpu-r1-01", "gpu-r1-02"]
    assert "--engine deepspeed" in lines[1] and "--steps 100" in lines[1] and "--node-rank=1" in lines[1]
    assert "NCCL_IB_HCA=mlx5_0,mlx5_1" in lines[0]


def test_the_launcher_refuses_hosts_whose_shipped_environment_is_not_the_jobs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.ship.conftest import make_venv
    from training.launch_cli import main
    from training.launcher import environment_mismatches
    from training.pack_env import pack

    man = pack(make_venv(tmp_path), tmp_path / "out")
    job_versions = dict(man["versions"])  # type: ignore[call-overload]
    summary = {"env_id": man["env_id"], "versions": job_versions}
    for host, versions in (("localhost", job_versions), ("127.0.0.2", {**job_versions, "torch": "2.12.0"})):
        (tmp_path / host).mkdir()
        (tmp_path / host / ".bringup-env-summary.json").write_text(json.dumps({**summary, "versions": versions}))
    manifest = tmp_path / "out" / "bringup-env.manifest.json"
    hosts = [Host("localhost", 1), Host("127.0.0.2", 1), Host("127.0.0.3", 1)]
    bad = environment_mismatches(hosts, manifest, str(tmp_path / "{host}"))
    assert sorted(bad) == ["127.0.0.2", "127.0.0.3"] and "no shipped environment" in bad["127.0.0.3"]
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=1\n127.0.0.2 slots=1\n")
    args = ["--hostfile", str(hostfile), "--config", "tiny", "--run-dir", str(tmp_path / "run"), "--dry-run",
            "--env-manifest", str(manifest), "--env-dir", str(tmp_path / "{host}")]
    assert main(args) == 1
    assert "127.0.0.2: environment" in capsys.readouterr().err
    hostfile.write_text("localhost slots=1\n")
    assert main(args) == 0
