"""The cabling importer on spreadsheets as partners send them: workbooks generated here with openpyxl in
several layouts (title block over the header, device names merged down, blank rows between racks, a notes
sheet, the partner's own headers), and the NDT-style CSV the importer has always read."""

from __future__ import annotations

import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import openpyxl
import pytest

from fabric.cli import main
from fabric.design_csv import CABLING_ALIASES, import_cabling_sheet
from fabric.errors import DesignError
from provision.site.sheets import SheetError, parse_columns


def _workbook(path: Path, sheets: Mapping[str, Sequence[Sequence[object]]], merges: dict[str, list[str]] | None = None) -> Path:
    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for title, rows in sheets.items():
        ws = wb.create_sheet(title)
        for row in rows:
            ws.append(row)
        for rng in (merges or {}).get(title, []):
            ws.merge_cells(rng)
    wb.save(path)
    return path


# Layout 1: a title block, the header on row 4, the leaf merged down over its cables, a blank row
# between racks, and a notes sheet with no cabling header.
TITLED: dict[str, list[list[object]]] = {
    "Cabling": [
        ["ACME DC cabling plan"], ["Hall 3, rev 7"], [],
        ["Cable Label", "Source Device", "Source Port", "Destination Device", "Destination Port", "Speed", "Width"],
        ["C1", "leaf-A-03-U40", 1, "gpu-01-01 mlx5_0", 1, "NDR", "4X"],
        [None, None, 2, "gpu-01-02 mlx5_0", 1, "NDR", "4X"],
        [],
        ["C3", "leaf-A-04-U40", 1, "gpu-02-01 mlx5_0", 1, "NDR", "4X"],
    ],
    "Notes": [["Anything below is informational"], ["call Bob"]],
}


def test_a_workbook_with_a_title_block_merged_devices_and_blank_rows_imports_every_cable(tmp_path: Path) -> None:
    path = _workbook(tmp_path / "plan.xlsx", TITLED, {"Cabling": ["B5:B6"]})
    d = import_cabling_sheet(path, None, "fabric", None, None)
    assert sorted((lk.a.node, lk.a.port, lk.b.node) for lk in d.links) == [
        ("leaf-A-03-U40", 1, "gpu-01-01/mlx5_0"), ("leaf-A-03-U40", 2, "gpu-01-02/mlx5_0"),
        ("leaf-A-04-U40", 1, "gpu-02-01/mlx5_0")]
    assert sorted(lk.number for lk in d.links) == [5, 6, 8]  # the sheet's own row numbers


# Layout 2: the partner's own words for every column, only readable with a mapping.
PARTNER: list[list[object]] = [["Server", "Srv Port", "Switch", "Sw Port", "Link Speed"],
           ["gpu-01-01 mlx5_0", "1", "leaf-A-03-U40", "Port 7", "NDR"]]


def test_partner_headers_need_the_column_mapping_and_read_with_it(tmp_path: Path) -> None:
    path = _workbook(tmp_path / "partner.xlsx", {"Sheet1": PARTNER})
    with pytest.raises(DesignError, match="sheet 'Sheet1': header lacks columns for a, a_port, b, b_port"):
        import_cabling_sheet(path, None, "fabric", "4X", None)
    mapping = parse_columns("a=Server,a_port=Srv Port,b=Switch,b_port=Sw Port", CABLING_ALIASES)
    d = import_cabling_sheet(path, None, "fabric", "4X", None, mapping)
    assert [(lk.a.node, lk.b.node, lk.b.port, lk.speed) for lk in d.links] == [
        ("gpu-01-01/mlx5_0", "leaf-A-03-U40", 7, "NDR")]
    with pytest.raises(SheetError, match="unknown field 'host'"):
        parse_columns("host=Server", CABLING_ALIASES)


def test_every_bad_row_is_reported_with_its_sheet_row_and_why(tmp_path: Path) -> None:
    rows: list[list[object]] = [TITLED["Cabling"][3],
            ["C1", "leaf-A-03-U40", "one", "gpu-01-01 mlx5_0", 1, "NDR", "4X"],
            ["C2", "", 2, "gpu-01-02 mlx5_0", 1, "NDR", "4X"],
            ["C3", "leaf-A-03-U40", 3, "gpu-01-03 mlx5_0", 1, "QDX", "4X"]]
    path = _workbook(tmp_path / "bad.xlsx", {"Rack A": rows, "Rack B": [rows[0], rows[1]]})
    with pytest.raises(DesignError) as e:
        import_cabling_sheet(path, None, "fabric", None, None)
    problems = e.value.problems
    assert [p.split(":")[0] for p in problems] == [
        "sheet 'Rack A' row 2", "sheet 'Rack A' row 3", "sheet 'Rack A' row 4", "sheet 'Rack B' row 2"]
    assert "port 'one' is not a number" in problems[0] and "a device is blank" in problems[1]
    assert "unknown width/speed" in problems[2]


def test_the_ndt_style_csv_numbers_rows_by_their_line_across_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "ndt.csv"
    path.write_text("Cable ID,Source Device,Source Port,Destination Device,Destination Port\n"
                    "C1,leaf-A-03-U40,1,gpu-01-01 mlx5_0,1\n\n,,,,\nC2,leaf-A-03-U40,x,gpu-01-02 mlx5_0,1\n")
    with pytest.raises(DesignError, match=r"row 5: needs two devices and two port numbers \(port 'x'"):
        import_cabling_sheet(path, None, "fabric", "4X", "NDR")


def test_a_workbook_that_expands_past_the_limit_or_is_not_a_zip_is_refused_before_parsing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bomb = tmp_path / "bomb.xlsx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("xl/worksheets/sheet1.xml", b"\0" * (3 * 1024 * 1024))
    monkeypatch.setattr("provision.site.sheets.MAX_XLSX_EXPANDED_BYTES", 1024 * 1024)
    with pytest.raises(DesignError, match="workbook expands to 3 MiB"):
        import_cabling_sheet(bomb, None, "fabric", "4X", "NDR")
    (tmp_path / "fake.xlsx").write_text("Cable,a\n")
    with pytest.raises(DesignError, match="not a zip archive"):
        import_cabling_sheet(tmp_path / "fake.xlsx", None, "fabric", "4X", "NDR")


def test_design_import_reads_a_workbook_with_a_mapping_file_and_exits_1_on_bad_rows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _workbook(tmp_path / "partner.xlsx", {"Sheet1": PARTNER})
    mapping = tmp_path / "columns.yml"
    mapping.write_text("a: Server\na_port: Srv Port\nb: Switch\nb_port: Sw Port\n")
    out = tmp_path / "design.yml"
    assert main(["design", "import", str(path), "--columns-file", str(mapping), "--width", "4X",
                 "--out", str(out)]) == 0
    assert "leaf-A-03-U40" in out.read_text()
    bad = _workbook(tmp_path / "bad.xlsx", {"Sheet1": [*PARTNER, ["gpu-01-02 mlx5_0", "1", "", "", "NDR"]]})
    assert main(["design", "import", str(bad), "--columns-file", str(mapping), "--width", "4X"]) == 1
    assert "sheet 'Sheet1' row 3" in capsys.readouterr().err
