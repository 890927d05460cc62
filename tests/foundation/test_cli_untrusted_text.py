"""Text from outside (BMC and MAAS messages, exception text, host names, endpoints) prints verbatim.

rich reads `[...]` as markup: unescaped, `[/redfish/v1/Systems]` raised MarkupError while the CLI reported
an error (a traceback instead of one line and exit 1) and `[fd00::1]` vanished as an unknown tag.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from provision.cli import main
from provision.command import output
from provision.command.exits import run_app
from provision.errors import BringupError
from tests.cli_run import run_cli
from tests.sites import copy_sim_site

REDFISH = "[/redfish/v1/Systems]"
IPV6 = "[fd00::1]:443"
BMC_TEXT = f"GET {REDFISH} at {IPV6}: [bold]Base.1.8.GeneralError[/] :warning:"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return copy_sim_site(tmp_path / "sim")


@pytest.fixture(autouse=True)
def wide_consoles(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Consoles 200 columns wide, so no table cell folds and a substring check sees the whole value."""
    monkeypatch.setenv("COLUMNS", "200")
    output._console.cache_clear()
    output.get_console.cache_clear()
    yield
    output._console.cache_clear()
    output.get_console.cache_clear()


def _failing_app(exc: BaseException) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def fail() -> None:
        raise exc

    return app


def _assert_one_error_line(err: str, *verbatim: str) -> None:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    for text in verbatim:
        assert text in lines[0], (text, lines[0])


def test_an_error_naming_a_redfish_path_and_an_ipv6_endpoint_is_one_verbatim_line_and_exit_1(
    site: Path
) -> None:
    code, _, err = run_cli(main, ["history", f"{REDFISH} {IPV6}", "--site", str(site)])
    assert code == 1
    _assert_one_error_line(err, f"host '{REDFISH} {IPV6}' is not in the state store")


@pytest.mark.parametrize("exc", [BringupError(BMC_TEXT), RuntimeError(BMC_TEXT)], ids=["bringup", "internal"])
def test_a_bmc_message_in_a_failing_command_is_one_verbatim_line_and_exit_1(
    exc: Exception, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BRINGUP_DEBUG", raising=False)
    code = run_app(_failing_app(exc), [], "provision")
    _, err = capsys.readouterr()
    assert code == 1
    _assert_one_error_line(err, BMC_TEXT)


def test_reporting_an_error_never_raises_even_when_the_message_cannot_be_read(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Unprintable(BringupError):
        def __str__(self) -> str:
            raise ValueError("no message")

    monkeypatch.delenv("BRINGUP_DEBUG", raising=False)
    assert run_app(_failing_app(Unprintable()), [], "provision") == 1
    _assert_one_error_line(capsys.readouterr().err, "Unprintable")


def test_reporting_an_error_never_raises_even_when_rich_cannot_print(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Broken:
        def print(self, *args: Any, **kwargs: Any) -> None:
            raise OSError("rich could not write")

    monkeypatch.setattr(output, "err_console", Broken())
    assert run_app(_failing_app(BringupError(BMC_TEXT)), [], "provision") == 1
    _assert_one_error_line(capsys.readouterr().err, BMC_TEXT)


def test_a_failed_hosts_table_prints_the_bmc_detail_and_remediation_verbatim(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from provision.cli.step_view import render_failures as _render_failures
    from provision.steps.runner import HostResult

    remediation = f"check {IPV6} [red]by hand[/]"
    _render_failures([HostResult("gpu-[r1]-01", ok=False, reason="bmc_http", detail=BMC_TEXT, remediation=remediation)])
    out = capsys.readouterr().out
    for text in ("gpu-[r1]-01", BMC_TEXT, remediation, "triage: bmc_http x1"):
        assert text in out, (text, out)


def test_a_health_table_prints_the_agent_evidence_verbatim(capsys: pytest.CaptureFixture[str]) -> None:
    from provision.cli.health_cmds import _render_health

    summary = f"nvidia-smi: {BMC_TEXT}"
    payload = {
        "site": "[sim]", "level": "fast", "checked": 1, "duration_s": 0.1, "by_verdict": {"critical": 1},
        "top_reasons": {"critical": [("xid_[79]", 1)]},
        "hosts": [{"host": "gpu-01", "verdict": "critical", "reason": "xid_[79]", "summary": summary}],
        "promoted_to_golden": [], "skipped": {}, "skipped_by_state": {}, "recorded": True,
        "not_recorded": {"gpu-02": f"refused: {REDFISH}"},
    }
    _render_health(payload)
    out = capsys.readouterr().out
    for text in ("[sim] health fast", "critical: xid_[79] (1)", summary, f"not recorded gpu-02: refused: {REDFISH}"):
        assert text in out, (text, out)


def test_history_prints_an_operators_reason_and_command_verbatim(
    site: Path
) -> None:
    reason = f"reinstalled via {IPV6} :warning:"
    code, out, _ = run_cli(main, ["mark", "gpu-r1-05", "deployed", "--reason", reason, "--site", str(site)])
    assert code == 0 and f"(override: {reason})" in out
    command = f"curl {REDFISH}"
    code, out, _ = run_cli(main, ["record", "gpu-r1-05", "configured", "--command", command, "--site", str(site)])
    assert code == 0 and "deployed → configured" in out
    code, out, _ = run_cli(main, ["history", "gpu-r1-05", "--site", str(site)])
    assert code == 0
    assert f"{reason} (override)" in out and command in out
