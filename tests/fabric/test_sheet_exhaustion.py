"""A tiny workbook cannot exhaust `fabric design import`: declared dimensions and merged ranges are checked
before anything is expanded, and rows are counted as they stream."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import openpyxl

from tests.fabric.conftest import REPO

MiB = 1024 * 1024


def _hostile_workbook(path: Path, dimension: str | None = None, merge: str | None = None, rows: int = 1) -> Path:
    wb = openpyxl.Workbook()
    ws = wb.active
    assert ws is not None
    ws.append(["a", "a_port", "b", "b_port"])
    for i in range(rows):
        ws.append([f"leaf-{i}", 1, "spine-1", i])
    plain = path.with_suffix(".plain.xlsx")
    wb.save(plain)
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "xl/worksheets/sheet1.xml":
                text = data.decode()
                if dimension is not None:
                    text = re.sub(r'<dimension ref="[^"]*" ?/>', f'<dimension ref="{dimension}"/>', text)
                if merge is not None:
                    text = text.replace("</sheetData>",
                                        f'</sheetData><mergeCells count="1"><mergeCell ref="{merge}"/></mergeCells>')
                data = text.encode()
            dst.writestr(item, data)
    return path


def _import_in_a_subprocess(workbook: Path) -> tuple[int, str, int]:
    """(exit code, stderr, peak RSS in MiB) of `fabric design import` on `workbook`."""
    # VmHWM: this process image's own peak (ru_maxrss would carry over the forking pytest worker's size across exec)
    code = ("import re, sys\nfrom fabric.cli import main\n"
            f"rc = main(['design', 'import', {str(workbook)!r}])\n"
            "peak = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
            "sys.stderr.write(f'\\nPEAK {peak}\\n')\n"
            "sys.exit(rc)\n")
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    peak_kib = int(done.stderr.rsplit("PEAK ", 1)[1].split()[0])
    return done.returncode, done.stderr, peak_kib // 1024


def test_a_merged_range_over_the_whole_sheet_is_refused_before_it_is_filled(tmp_path: Path) -> None:
    book = _hostile_workbook(tmp_path / "merged.xlsx", merge="A1:XFD1048576")
    assert book.stat().st_size < 16 * 1024
    rc, err, peak_mib = _import_in_a_subprocess(book)
    assert rc == 2, err
    assert "merged range A1:XFD1048576 is past the limit" in err
    assert peak_mib < 300, f"peak RSS {peak_mib} MiB"


def test_a_sheet_declaring_a_million_rows_is_refused_before_its_rows_are_read(tmp_path: Path) -> None:
    book = _hostile_workbook(tmp_path / "tall.xlsx", dimension="A1:D1000000")
    rc, err, peak_mib = _import_in_a_subprocess(book)
    assert rc == 2, err
    assert "is 1000000 rows x 4 columns (limit 200000 x 256)" in err
    assert peak_mib < 300, f"peak RSS {peak_mib} MiB"


def test_rows_past_the_limit_are_refused_while_streaming_whatever_the_sheet_declares(tmp_path: Path) -> None:
    from fabric import sheets
    from fabric.errors import DesignError

    book = _hostile_workbook(tmp_path / "lying.xlsx", dimension="A1:D2", rows=30)
    saved, sheets.MAX_ROWS = sheets.MAX_ROWS, 20
    try:
        sheets.read_table(book, {"a": {"a"}}, ("a",))
    except DesignError as e:
        assert "more than 20 rows" in str(e)
    else:
        raise AssertionError("a sheet over the row limit was read")
    finally:
        sheets.MAX_ROWS = saved
