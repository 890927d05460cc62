"""`fabric` and `provision` share one error-to-exit-code mapping (provision.cli.runner); only the code of an
error and the look of its line differ."""

from __future__ import annotations

import pytest
import typer

from fabric.cli import FABRIC_ERRORS
from provision.cli.runner import PROVISION_ERRORS, ErrorExit, run_app
from provision.errors import BringupError


def _failing_app(exc: BaseException) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def fail(count: int = 1) -> None:
        raise exc

    return app


class _Unprintable(BringupError):
    def __str__(self) -> str:
        raise ValueError("no message")


@pytest.mark.parametrize(("exc", "fabric_code", "provision_code"), [
    (BringupError("no such site"), 2, 1),
    (RuntimeError("bug"), 2, 1),
    (KeyboardInterrupt(), 130, 130),
    (typer.Exit(3), 3, 3),
], ids=["bringup-error", "internal-error", "interrupted", "explicit-exit"])
def test_each_failure_maps_to_the_same_exit_code_in_both_programs_but_an_errors_code(
        exc: BaseException, fabric_code: int, provision_code: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRINGUP_DEBUG", raising=False)
    assert run_app(_failing_app(exc), [], "fabric", FABRIC_ERRORS) == fabric_code
    assert run_app(_failing_app(exc), [], "provision", PROVISION_ERRORS) == provision_code


def test_a_usage_error_exits_2_in_both_programs(capsys: pytest.CaptureFixture[str]) -> None:
    for errors in (FABRIC_ERRORS, PROVISION_ERRORS):
        assert run_app(_failing_app(BringupError("x")), ["--count", "many"], "prog", errors) == 2
        assert "'many' is not a valid integer" in capsys.readouterr().err


def test_fabric_errors_are_one_prefixed_line_even_when_the_message_has_several_or_none(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert run_app(_failing_app(BringupError("site.yml: 2 problems\n  a\n  b")), [], "fabric", FABRIC_ERRORS) == 2
    assert capsys.readouterr().err == "fabric: error: site.yml: 2 problems;   a;   b\n"
    assert run_app(_failing_app(_Unprintable()), [], "fabric", FABRIC_ERRORS) == 2
    assert capsys.readouterr().err == "fabric: error: <_Unprintable whose message could not be read>\n"


def test_an_internal_error_says_how_to_see_the_traceback_and_bringup_debug_raises_it(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    lines: list[str] = []
    errors = ErrorExit(code=5, report=lines.append)
    monkeypatch.delenv("BRINGUP_DEBUG", raising=False)
    assert run_app(_failing_app(ZeroDivisionError("division by zero")), [], "prog", errors) == 5
    assert lines == ["internal error: ZeroDivisionError: division by zero (set BRINGUP_DEBUG=1 for the traceback)"]
    monkeypatch.setenv("BRINGUP_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        run_app(_failing_app(ZeroDivisionError("division by zero")), [], "prog", errors)
