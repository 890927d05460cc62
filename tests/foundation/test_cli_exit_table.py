"""Every command of every program (`provision`, `fabric` and its sub-apps, `sim`, the Ansible inventory script,
`python -m training`) follows the one exit-code table (provision/command/exits.py, ARCHITECTURE.md): 0 done, 1 could
not do it, 2 ran and found problems, 130 interrupted; an error is one line, `error: ...`, with the secrets the
process holds masked, never a traceback.

`python -m training` is an argparse program that imports nothing of provision's (training/exits.py keeps the table
by hand): its commands are walked by name."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import click
import pytest
import typer

from provision.command.exits import ERROR, INTERRUPTED, OK, PROBLEMS, ProblemsFound, run_app
from provision.errors import BringupError
from provision.state.secret_values import MASK, hold
from tests.cli_run import CliRun, run_cli

SECRET = "Zq8-hunter2-s3cret-Vx7"  # a credential as a site could name one; path-safe
# What a command needs past its required parameters to get as far as reading its input.
EXTRA: dict[str, list[str]] = {
    "fabric ports reenable": ["--repaired"],  # refused before anything is read without it
    "fabric topology": ["--discovered", "{dir}/ibnetdiscover.txt"],  # one source of the fabric is required
    "fabric validate": ["--discovered", "{dir}/ibnetdiscover.txt"],
    "python -m provision.ansible_inventory": ["--list"],  # one of --list, --host, --export is required
}


@cache
def _programs() -> dict[str, tuple[Callable[[list[str]], int], click.Command]]:
    from fabric.cli import app as fabric_app
    from fabric.cli import main as fabric_main
    from provision.ansible_inventory.__main__ import app as inventory_app
    from provision.ansible_inventory.__main__ import main as inventory_main
    from provision.cli import app as provision_app
    from provision.cli import load_commands
    from provision.cli import main as provision_main

    load_commands([])  # every command module
    sim_app: typer.Typer = importlib.import_module("sim.__main__").app
    return {
        "provision": (provision_main, typer.main.get_command(provision_app)),
        "fabric": (fabric_main, typer.main.get_command(fabric_app)),
        "sim": (lambda argv: run_app(sim_app, argv, "sim"), typer.main.get_command(sim_app)),
        "python -m provision.ansible_inventory": (inventory_main, typer.main.get_command(inventory_app)),
    }


def _leaves(command: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Command]]:
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from _leaves(sub, [*path, name])
    else:
        yield path, command


def _commands() -> Iterator[tuple[str, Callable[[list[str]], int], list[str], click.Command]]:
    for program, (main, root) in _programs().items():
        for path, command in _leaves(root, []):
            yield program, main, path, command


def _takes_site(command: click.Command) -> bool:
    return any("--site" in getattr(p, "opts", ()) for p in command.params)


def _filled(command: click.Command, where: Path) -> tuple[list[str], bool]:
    """Values for the command's required parameters, each carrying the secret where it can (a path under a
    directory named by it, the secret itself for text); and whether any of them names an input."""
    argv: list[str] = []
    names_input = False
    for param in command.params:
        if not param.required:
            continue
        kind = param.type
        if isinstance(kind, click.Choice):
            value = str(kind.choices[0])
        elif isinstance(kind, click.types.IntParamType | click.types.FloatParamType):
            value = "1"
        elif isinstance(kind, click.Path):
            value, names_input = str(where / f"{param.name}.txt"), True
        else:
            value, names_input = SECRET, True
        if isinstance(param, click.Option):
            argv += [param.opts[0], value]
        else:
            argv.append(value)
    return argv, names_input


def _one_error_line(run: CliRun) -> str:
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    return lines[0]


def test_every_command_answers_an_unknown_option_with_one_line_and_exit_1(
        capsys: pytest.CaptureFixture[str]) -> None:
    walked = 0
    for program, main, path, _ in _commands():
        name = " ".join([program, *path])
        run = run_cli(main, [*path, "--no-such-option"])
        assert run.code == ERROR, (name, run)
        line = _one_error_line(run)
        assert "--no-such-option" in line and f"`{name} --help`" in line, line
        assert run.stdout == "", name
        walked += 1
    assert walked >= 45  # provision's 29, fabric's 17, sim's 5 when this was written: the walk found them


def test_every_command_reading_a_site_or_a_file_fails_on_an_unreadable_one_in_one_masked_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRINGUP_STATE_DB", raising=False)
    monkeypatch.delenv("BRINGUP_SITE", raising=False)
    hold(SECRET)
    where = tmp_path / SECRET  # never created: every path under it is unreadable
    walked = []
    for program, main, path, command in _commands():
        name = " ".join([program, *path])
        argv, names_input = _filled(command, where)
        if _takes_site(command):
            argv += ["--site", str(where / "site.yml")]
        elif not names_input:
            continue  # nothing it reads can be made unreadable (`fabric design generate --hosts N`)
        argv += [a.replace("{dir}", str(where)) for a in EXTRA.get(name, [])]
        run = run_cli(main, [*path, *argv])
        assert run.code == ERROR, (name, run)
        line = _one_error_line(run)
        assert SECRET not in run.stdout + run.stderr, (name, line)
        assert MASK in line, (name, line)  # the input was named in the error, with the secret masked
        walked.append(name)
    assert {"provision harvest-macs", "fabric validate", "fabric ports apply", "fabric burnin run",
            "sim status", "python -m provision.ansible_inventory"} <= set(walked)


def test_every_command_given_another_sites_database_refuses_it_as_provision_status_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.state import StateStore
    from provision.state.opening import SiteIdentity

    monkeypatch.delenv("BRINGUP_STATE_DB", raising=False)
    site = Path(__file__).resolve().parents[2] / "inventory" / "sim" / "site.yml"
    other = tmp_path / "other.db"
    StateStore(other, site=SiteIdentity.of("elsewhere", tmp_path / "elsewhere.yml")).close()
    refusal = _one_error_line(run_cli(_programs()["provision"][0], ["status", "--site", str(site), "--db", str(other)]))
    assert "the state store of site 'elsewhere'" in refusal
    extra = {"fabric ports reenable": ["--repaired"], "python -m provision.ansible_inventory": ["--list"],
             "fabric topology": ["--discovered", str(site.parents[2] / "tests" / "fixtures" / "fabric" /
                                                     "ibsim-sim-site.ibnetdiscover.txt")]}
    walked = []
    for program, main, path, command in _commands():
        name = " ".join([program, *path])
        if not any("--db" in getattr(p, "opts", ()) for p in command.params) or name in (
                "provision db adopt",  # takes another site's database over: what it is for
                "provision db check"):  # reports the store's identity among its problems, its own way
            continue
        required = [p for p in command.params if p.required]
        if any(isinstance(param.type, click.Path) for param in required):
            continue  # a file it reads first (`--plan`, `--env`): not this test's subject
        argv: list[str] = []
        for param in required:
            value = str(param.type.choices[0]) if isinstance(param.type, click.Choice) else "x"
            argv += [param.opts[0], value] if isinstance(param, click.Option) else [value]
        run = run_cli(main, [*path, *argv, *extra.get(name, []), "--site", str(site), "--db", str(other)])
        assert (run.code, _one_error_line(run)) == (ERROR, refusal), name
        walked.append(name)
    assert {"fabric ports apply", "fabric ports list", "fabric burnin judge", "fabric burnin nightly",
            "fabric topology", "provision health", "python -m provision.ansible_inventory"} <= set(walked), walked


def _failing(exc: BaseException) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def fail(count: int = 1) -> None:
        raise exc

    return app


class _Unprintable(BringupError):
    def __str__(self) -> str:
        raise ValueError("no message")


@pytest.mark.parametrize(("exc", "code"), [
    (BringupError("no such site"), ERROR),
    (ProblemsFound("2 of 8 hosts failed"), PROBLEMS),
    (typer.Exit(PROBLEMS), PROBLEMS),
    (typer.Exit(OK), OK),
    (click.exceptions.Abort(), ERROR),
    (RuntimeError("bug"), ERROR),
    (KeyboardInterrupt(), INTERRUPTED),
], ids=["error", "problems-found", "problems-exit", "explicit-ok", "abort", "internal-error", "interrupted"])
def test_each_outcome_maps_to_its_row_of_the_table(exc: BaseException, code: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRINGUP_DEBUG", raising=False)
    assert run_app(_failing(exc), [], "prog") == code


def test_a_malformed_value_is_a_usage_error_in_one_line_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_app(_failing(BringupError("x")), ["--count", "many"], "prog") == ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'many' is not a valid integer" in err and "`prog --help`" in err


def test_a_message_of_several_lines_or_none_is_still_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_app(_failing(BringupError("site.yml: 2 problems\n  a\n  b")), [], "prog") == ERROR
    assert capsys.readouterr().err == "error: site.yml: 2 problems; a; b\n"
    assert run_app(_failing(_Unprintable()), [], "prog") == ERROR
    assert capsys.readouterr().err == "error: <_Unprintable whose message could not be read>\n"


def test_problems_found_ends_with_a_problems_line_not_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    hold(SECRET)
    assert run_app(_failing(ProblemsFound(f"2 of 8 hosts failed (bmc {SECRET})")), [], "prog") == PROBLEMS
    assert capsys.readouterr().err == f"problems: 2 of 8 hosts failed (bmc {MASK})\n"


def test_a_secret_in_an_error_is_masked(capsys: pytest.CaptureFixture[str]) -> None:
    hold(SECRET)
    assert run_app(_failing(BringupError(f"BMC answered 401: you sent {SECRET}")), [], "prog") == ERROR
    assert capsys.readouterr().err == f"error: BMC answered 401: you sent {MASK}\n"


def test_an_internal_error_says_how_to_see_the_traceback_and_bringup_debug_raises_it(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRINGUP_DEBUG", raising=False)
    assert run_app(_failing(ZeroDivisionError("division by zero")), [], "prog") == ERROR
    assert capsys.readouterr().err == ("error: internal error: ZeroDivisionError: division by zero "
                                       "(set BRINGUP_DEBUG=1 for the traceback)\n")
    monkeypatch.setenv("BRINGUP_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        run_app(_failing(ZeroDivisionError("division by zero")), [], "prog")


# What each `python -m training` command reads first, under a directory named by a secret (never created).
TRAINING_INPUTS: dict[str, list[str]] = {
    "launch": ["--config", "tiny", "--hostfile", "{dir}/hosts"],
    "merge": ["{dir}/step_00000010", "{dir}/out.safetensors"],
    "pack-env": ["--venv", "{dir}/venv", "--out", "{dir}/out"],
    "prepare-data": ["--tokenizer", "{dir}/tokenizer.json", "--input", "{dir}/shards", "--out", "{dir}/out"],
    "report": ["{dir}/run"],
    "tokenizer": ["--data", "{dir}/corpus", "--out", "{dir}/tokenizer.json"],
}


def test_every_training_command_answers_an_unknown_option_with_one_line_and_exit_1_the_worker_2() -> None:
    """~3 s: `train` and `merge` import torch."""
    from training.cli import COMMANDS
    from training.cli import main as training_main

    for command in COMMANDS:
        run = run_cli(training_main, [command, "--no-such-option"])
        # the worker torchrun starts keeps its own 2: wrong arguments, which no restart cures (training/train.py)
        assert run.code == (PROBLEMS if command == "train" else ERROR), (command, run)
        assert f"`python -m training {command} --help`" in _one_error_line(run)
        assert run.stdout == "", command
    for argv in (["no-such-command"], ["plan", "--config", "tiny", "--gpus", "many", "--gpu-mem", "80"]):
        run = run_cli(training_main, argv)
        assert run.code == ERROR and "--help`" in _one_error_line(run), run
    bare = run_cli(training_main, [])
    assert bare.code == ERROR and bare.stderr.startswith("usage: python -m training {launch,")
    assert run_cli(training_main, ["--help"]).code == OK


def test_every_training_command_reading_a_file_fails_on_an_unreadable_one_in_one_masked_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from training.cli import main as training_main

    monkeypatch.setenv("BRINGUP_TEST_TOKEN", SECRET)  # a secret the process holds: a variable named as one
    where = tmp_path / SECRET
    for command, argv in TRAINING_INPUTS.items():
        run = run_cli(training_main, [command, *(a.replace("{dir}", str(where)) for a in argv)])
        assert run.code == ERROR, (command, run)
        line = _one_error_line(run)
        assert SECRET not in run.stdout + run.stderr and MASK in line, (command, line)
        assert "internal error" not in line, (command, line)


def test_training_plan_over_the_gpus_memory_is_problems_found_and_an_interrupt_is_130(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from training.cli import main as training_main
    from training.exits import run_command

    assert training_main(["plan", "--config", "llama3_70b", "--gpus", "1", "--gpu-mem", "80", "--json"]) == PROBLEMS
    assert training_main(["plan", "--config", "tiny", "--gpus", "1", "--gpu-mem", "80", "--json"]) == OK
    capsys.readouterr()

    def interrupted(argv: list[str]) -> int:
        raise KeyboardInterrupt

    def buggy(argv: list[str]) -> int:
        return 1 // 0

    assert run_command(interrupted, []) == INTERRUPTED
    assert capsys.readouterr().err == "error: interrupted\n"
    monkeypatch.delenv("BRINGUP_DEBUG", raising=False)
    assert run_command(buggy, []) == ERROR
    assert capsys.readouterr().err == ("error: internal error: ZeroDivisionError: integer division or modulo by zero "
                                       "(set BRINGUP_DEBUG=1 for the traceback)\n")
    monkeypatch.setenv("BRINGUP_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        run_command(buggy, [])
    monkeypatch.delenv("BRINGUP_DEBUG")
    with pytest.raises(ZeroDivisionError):  # the worker: a rank's log keeps the traceback of its crash
        run_command(buggy, [], tracebacks=True)
