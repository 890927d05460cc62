"""Text from peers is shown, never run: control characters and escape sequences escaped, rich markup
printed as text; CSV exports never start a cell with a formula."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from provision.state.peer_text import csv_cell, csv_text, shown

HOSTILE = "[/bold]\x1b[31mred\x1b]0;title\x07\x9b2J\x7f\u202eok"


def test_control_characters_and_escape_sequences_are_shown_escaped() -> None:
    out = shown(HOSTILE)
    assert out == "[/bold]\\x1b[31mred\\x1b]0;title\\x07\\x9b2J\\x7f\\u202eok"
    assert shown("a\nb\tc") == "a\\nb\\tc" and shown("é") == "é" and shown("é", ascii_only=True) == "\\xe9"
    assert shown("x" * 10, 5) == "xxxx…"


def test_esc_and_error_line_escape_markup_and_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    from provision.command.output import console, error_line, esc

    console.print(f"host: {esc(HOSTILE)}")
    error_line(f"BMC says {HOSTILE}")
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "[/bold]\\x1b[31mred" in out and "[/bold]\\x1b[31mred" in err


def test_a_bmc_error_body_is_kept_with_its_escapes_shown() -> None:
    from provision.redfish.errors import RedfishRequestRejected, extended_info

    messages, ids = extended_info({"error": {"@Message.ExtendedInfo": [{"Message": HOSTILE, "MessageId": "X\x1b"}]}})
    err = RedfishRequestRejected("rejected", messages=messages, message_ids=ids)
    assert "\x1b" not in str(err) and "\\x1b[31mred" in str(err) and ids == ("X\\x1b",)


def test_lldp_names_in_ethernet_check_output_are_shown_not_run(capsys: pytest.CaptureFixture[str]) -> None:
    from provision.cli.ethernet_cmds import _print

    finding = {"host": "gpu-1", "role": "pxe", "mac": "aa:bb:cc:dd:ee:ff", "status": "miswired",
               "reason": f"LLDP says system {HOSTILE}", "fix": "recable"}
    _print({"switches": [], "findings": [finding], "counts": {}, "seconds": 0.1})
    out = capsys.readouterr().out
    assert "\x1b" not in out and "system [/bold]\\x1b[31mred" in out


def test_a_node_description_with_markup_and_ansi_does_not_abort_fabric_validate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fabric.cli import main
    from fabric.design import Port, load_design
    from fabric.topology import NodeType
    from sim.asbuilt import AsBuilt
    from tests.fabric.conftest import SIM_DESIGN

    design = load_design(SIM_DESIGN)
    ab = AsBuilt.from_design(design)
    leaf = design.switches()[0].name
    free = next(p for p in range(1, 41) if Port(leaf, p) not in ab.plugs)
    ab.add_node("rogue", NodeType.CA, 1, f"{HOSTILE} mlx5_0", 0xDEAD00000001)
    ab.plug(Port("rogue", 1), Port(leaf, free))
    cap = tmp_path / "cap.txt"
    cap.write_text(ab.render(only=ab.reachable("gpu-r1-01/mlx5_0")))
    assert main(["validate", "--design", str(SIM_DESIGN), "--discovered", str(cap)]) == 2
    out = capsys.readouterr().out
    assert "1 finding(s)" in out and "\x1b" not in out and "[/bold]\\x1b[31mred" in out


@pytest.mark.parametrize("value", ["=HYPERLINK(\"http://x\")", "@SUM(A1)", "+1", "-1+2", "\tx", "\rx"])
def test_a_cell_starting_like_a_formula_gets_a_leading_quote(value: str) -> None:
    assert csv_cell(value) == "'" + value
    assert csv_cell("SN123") == "SN123" and csv_cell(None) == ""


def test_harvest_and_worklist_csv_exports_neutralise_a_hostile_serial() -> None:
    rows = list(csv.DictReader(io.StringIO(csv_text(["serial", "u"], [{"serial": "=cmd|' /C calc'!A0", "u": -3}]))))
    assert rows == [{"serial": "'=cmd|' /C calc'!A0", "u": "-3"}]
    from fabric import worklist
    from provision.bmc import export
    assert "csv_text" in worklist.worklist_csv.__code__.co_names and "csv_text" in export.to_csv.__code__.co_names
