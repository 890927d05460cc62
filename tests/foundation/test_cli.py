"""The `provision` CLI: every command has --site/--json, errors are one line and exit 1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from provision.cli import main
from provision.hostfiles import GoldenHost, HostfileError, HostfileFormat, compress_hostlist, render_hostfile
from provision.state import State, StateStore
from tests.cli_run import run_cli
from tests.sites import copy_sim_site

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return copy_sim_site(tmp_path / "sim")


def test_status_json_counts_states_racks_and_failures(site: Path) -> None:
    store = StateStore(site.parent / "state" / "sim.db")
    store.sync_site([("gpu-r1-01", "r1"), ("gpu-r1-02", "r1")])
    store.transition("gpu-r1-01", State.bmc_reachable, command="test")
    store.fail("gpu-r1-02", "bmc_auth", command="harvest-macs", evidence={"status": 401})
    code, out, _ = run_cli(main, ["status", "--site", str(site), "--json"])
    assert code == 0
    payload = json.loads(out)
    assert payload["hosts"] == 17
    assert payload["by_state"]["declared"] == 15 and payload["by_state"]["failed"] == 1
    assert payload["by_rack"]["r1"] == {"bmc_reachable": 1, "declared": 6, "failed": 1}
    assert payload["failed"][0]["host"] == "gpu-r1-02" and payload["failed"][0]["reason"] == "bmc_auth"
    assert payload["failed"][0]["failed_while"] == "declared"


def test_status_table_names_failed_hosts(site: Path) -> None:
    run_cli(main, ["mark", "gpu-r2-03", "failed", "--reason", "xid_79", "--site", str(site)])
    code, out, _ = run_cli(main, ["status", "--site", str(site)])
    assert code == 0 and "failed hosts" in out and "gpu-r2-03" in out and "xid_79" in out


def test_mark_then_history_shows_the_override(site: Path) -> None:
    code, out, _ = run_cli(main, ["mark", "gpu-r1-05", "deployed", "--reason", "installed by hand", "--site", str(site)])
    assert code == 0 and "declared → deployed" in out
    code, out, _ = run_cli(main, ["history", "gpu-r1-05", "--site", str(site), "--json"])
    events = json.loads(out)
    assert [e["to"] for e in events] == ["declared", "deployed"]
    assert events[-1]["override"] is True and events[-1]["reason"] == "installed by hand"


def test_record_is_validated_and_idempotent(site: Path, tmp_path: Path) -> None:
    evidence = tmp_path / "e.json"
    evidence.write_text('{"task": "nvidia_driver : install"}')
    code, _, err = run_cli(main, ["record", "gpu-r1-01", "configured", "--command", "site.yml", "--site", str(site)])
    assert code == 1 and "declared → configured skips" in err and len(err.strip().splitlines()) == 1
    run_cli(main, ["mark", "gpu-r1-01", "deployed", "--reason", "maas", "--site", str(site)])
    code, out, _ = run_cli(main, ["record", "gpu-r1-01", "configured", "--command", "site.yml",
                        "--evidence-file", str(evidence), "--site", str(site), "--json"])
    assert code == 0 and json.loads(out)["changed"] is True
    code, out, _ = run_cli(main, ["record", "gpu-r1-01", "configured", "--command", "site.yml", "--site", str(site), "--json"])
    assert json.loads(out)["changed"] is False


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["history", "no-such-host"], "host 'no-such-host' is not in the state store"),
        (["mark", "gpu-r1-01", "shiny", "--reason", "x"], "unknown state 'shiny'"),
        (["mark", "gpu-r1-01", "failed", "--reason", "it broke"], "machine-readable reason"),
        (["record", "gpu-r1-01", "failed", "--command", "x"], "machine-readable reason"),
    ],
)
def test_errors_are_one_line_and_exit_1(site: Path, argv: list[str], message: str) -> None:
    code, _, err = run_cli(main, [*argv, "--site", str(site)])
    assert code == 1
    assert message in err and "Traceback" not in err
    assert err.startswith("error:")


def test_bad_site_reports_every_problem(tmp_path: Path) -> None:
    bad = copy_sim_site(tmp_path / "bad")
    text = bad.read_text()
    bad.write_text(text.replace("address: 127.0.16.3,", "address: 127.0.16.300,").replace("u: 2,", "u: 0,"))
    code, _, err = run_cli(main, ["status", "--site", str(bad)])
    assert code == 1 and "3 problems" in err
    assert "racks[0].hosts[2].bmc.address: not an IP address or hostname" in err
    assert "racks[0].hosts[0].u: Input should be greater than or equal to 1" in err
    assert "racks[1].hosts[0].u: Input should be greater than or equal to 1" in err


def test_golden_hostfiles(site: Path) -> None:
    for host in ("gpu-r1-01", "gpu-r1-02", "gpu-r2-07"):
        run_cli(main, ["mark", host, "golden", "--reason", "test", "--site", str(site)])
    code, out, _ = run_cli(main, ["golden", "--site", str(site), "--format", "deepspeed"])
    assert code == 0 and out == "gpu-r1-01 slots=2\ngpu-r1-02 slots=2\ngpu-r2-07 slots=2\n"
    _, out, _ = run_cli(main, ["golden", "--site", str(site), "--format", "slurm"])
    assert out == "gpu-r1-[01-02],gpu-r2-07\n"
    _, out, _ = run_cli(main, ["golden", "--site", str(site), "--json"])
    assert json.loads(out)["gpus"] == 6


def test_hostlist_compression_and_torchrun_env() -> None:
    assert compress_hostlist(["n1", "n2", "n3", "n5", "x", "n10"]) == "n[1-3,5,10],x"
    assert compress_hostlist(["a-01", "a-02", "a-04"]) == "a-[01-02,04]"
    hosts = [GoldenHost("a", "r1", 8), GoldenHost("b", "r1", 8)]
    text = render_hostfile(hosts, HostfileFormat.torchrun)
    assert "NNODES=2" in text and "NPROC_PER_NODE=8" in text and "RDZV_ENDPOINT=a:29500" in text


def test_console_script_runs(site: Path) -> None:
    exe = Path(sys.executable).with_name("provision")
    out = subprocess.run([str(exe), "status", "--site", str(site), "--json"], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["site"] == "sim"


def test_every_command_module_is_mapped_and_help_lists_them_all(capsys: pytest.CaptureFixture[str]) -> None:
    from provision.cli import COMMAND_MODULES, app, load_commands

    load_commands()
    registered = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    registered |= {g.name for g in app.registered_groups if g.name}
    assert registered == set(COMMAND_MODULES)
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMAND_MODULES)


def test_status_does_not_import_the_network_clients(site: Path) -> None:
    code = "import sys; from provision.cli import main; main(['status', '--json', '--site', sys.argv[1]]); " \
           "print(sorted(m for m in ('httpx', 'asyncssh', 'pydantic', 'rich') if m in sys.modules))"
    first = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True, text=True, check=True)
    assert first.stdout.strip().splitlines()[-1] == "['pydantic']"  # a new site is validated in full once
    again = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True, text=True, check=True)
    assert again.stdout.strip().splitlines()[-1] == "[]"


def test_hosts_without_gpus_never_enter_a_hostfile_even_when_golden(
    site: Path
) -> None:
    for host in ("gpu-r1-01", "ctl-01"):
        run_cli(main, ["mark", host, "golden", "--reason", "test", "--site", str(site)])
    code, out, _ = run_cli(main, ["golden", "--site", str(site), "--format", "deepspeed"])
    assert code == 0 and out == "gpu-r1-01 slots=2\n"
    code, out, _ = run_cli(main, ["golden", "--site", str(site), "--format", "torchrun", "--rdzv-port", "29600"])
    assert code == 0 and "RDZV_ENDPOINT=gpu-r1-01:29600" in out and "NNODES=1" in out


def test_torchrun_refuses_a_golden_set_with_mixed_gpu_counts() -> None:
    hosts = [GoldenHost("a", "r1", 8), GoldenHost("b", "r1", 4)]
    with pytest.raises(HostfileError, match="8 GPUs: 1 hosts"):
        render_hostfile(hosts, HostfileFormat.torchrun)
    assert render_hostfile(hosts, HostfileFormat.deepspeed) == "a slots=8\nb slots=4\n"
