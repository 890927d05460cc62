"""A tiny workbook cannot exhaust `fabric design import`: declared dimensions and merged ranges are checked
before anything is expanded, and rows are counted as they stream."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import openpyxl
import pytest

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
    assert rc == 1, err
    assert "merged range A1:XFD1048576 is past the limit" in err
    assert peak_mib < 300, f"peak RSS {peak_mib} MiB"


def test_a_sheet_declaring_a_million_rows_is_refused_before_its_rows_are_read(tmp_path: Path) -> None:
    book = _hostile_workbook(tmp_path / "tall.xlsx", dimension="A1:D1000000")
    rc, err, peak_mib = _import_in_a_subprocess(book)
    assert rc == 1, err
    assert "is 1000000 rows x 4 columns (limit 200000 x 256)" in err
    assert peak_mib < 300, f"peak RSS {peak_mib} MiB"


def test_rows_past_the_limit_are_refused_while_streaming_whatever_the_sheet_declares(tmp_path: Path) -> None:
    from provision.site import sheets

    book = _hostile_workbook(tmp_path / "lying.xlsx", dimension="A1:D2", rows=30)
    saved, sheets.MAX_ROWS = sheets.MAX_ROWS, 20
    try:
        sheets.read_table(book, {"a": {"a"}}, ("a",))
    except sheets.SheetError as e:
        assert "more than 20 rows" in str(e)
    else:
        raise AssertionError("a sheet over the row limit was read")
    finally:
        sheets.MAX_ROWS = saved


_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG = "http://schemas.openxmlformats.org/package/2006"
_CT = "application/vnd.openxmlformats-officedocument.spreadsheetml"


def _shared_strings_workbook(path: Path, filler: int = 0, prefix: str = "") -> Path:
    """A cabling workbook whose texts are shared strings (as Excel writes them; openpyxl writes inline ones),
    with `filler` more shared strings nothing refers to; `prefix`: the spreadsheet namespace's prefix."""
    p, ns = (f"{prefix}:", f'xmlns:{prefix}="{_MAIN}"') if prefix else ("", f'xmlns="{_MAIN}"')
    texts = ["a", "a_port", "b", "b_port", "leaf-1", "spine-1"]
    sst = (f'<?xml version="1.0" encoding="UTF-8"?><{p}sst {ns} count="{len(texts)}" uniqueCount="{len(texts)}">'
           + "".join(f"<{p}si><{p}t>{t}</{p}t></{p}si>" for t in texts)
           + f"<{p}si><{p}t>x</{p}t></{p}si>" * filler + f"</{p}sst>")
    row1 = "".join(f'<c r="{col}1" t="s"><v>{i}</v></c>' for i, col in enumerate("ABCD"))
    row2 = '<c r="A2" t="s"><v>4</v></c><c r="B2"><v>1</v></c><c r="C2" t="s"><v>5</v></c><c r="D2"><v>2</v></c>'
    parts = {
        "[Content_Types].xml": f'<Types xmlns="{_PKG}/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        f'<Override PartName="/xl/workbook.xml" ContentType="{_CT}.sheet.main+xml"/>'
        f'<Override PartName="/xl/worksheets/sheet1.xml" ContentType="{_CT}.worksheet+xml"/>'
        f'<Override PartName="/xl/strings.xml" ContentType="{_CT}.sharedStrings+xml"/></Types>',
        "_rels/.rels": f'<Relationships xmlns="{_PKG}/relationships">'
        f'<Relationship Id="rId1" Type="{_REL}/officeDocument" Target="xl/workbook.xml"/></Relationships>',
        "xl/workbook.xml": f'<workbook xmlns="{_MAIN}" xmlns:r="{_REL}">'
        '<sheets><sheet name="Cabling" sheetId="1" r:id="rId1"/></sheets></workbook>',
        "xl/_rels/workbook.xml.rels": f'<Relationships xmlns="{_PKG}/relationships">'
        f'<Relationship Id="rId1" Type="{_REL}/worksheet" Target="worksheets/sheet1.xml"/>'
        f'<Relationship Id="rId2" Type="{_REL}/sharedStrings" Target="strings.xml"/></Relationships>',
        "xl/worksheets/sheet1.xml": f'<worksheet xmlns="{_MAIN}"><sheetData><row r="1">{row1}</row>'
        f'<row r="2">{row2}</row></sheetData></worksheet>',
        "xl/strings.xml": sst,  # named by the content types, as openpyxl finds it: not the usual sharedStrings.xml
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in parts.items():
            z.writestr(name, text)
    return path


_ALIASES = {"a": {"a"}, "a_port": {"a_port"}, "b": {"b"}, "b_port": {"b_port"}}


def test_a_million_shared_strings_in_a_small_workbook_are_refused_before_they_are_loaded(tmp_path: Path) -> None:
    # unbounded, openpyxl loads every one as a Python string: 3,000,000 of them in a 125 KB file took 81 s and
    # 375 MiB (measured before the bound)
    book = _shared_strings_workbook(tmp_path / "strings.xlsx", filler=1_200_000)
    assert book.stat().st_size < 64 * 1024
    rc, err, peak_mib = _import_in_a_subprocess(book)
    assert rc == 1, err
    assert "the workbook has more than 1000000 shared strings (xl/strings.xml): refused before loading them" in err
    assert peak_mib < 200, f"peak RSS {peak_mib} MiB"


def test_shared_strings_are_counted_exactly_across_the_streams_chunks(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.site import sheets

    for prefix in ("", "x"):
        small = _shared_strings_workbook(tmp_path / f"small{prefix}.xlsx", prefix=prefix)
        rows = sheets.read_table(small, _ALIASES, tuple(_ALIASES)).rows
        assert [r.fields for r in rows] == [{"a": "leaf-1", "a_port": "1", "b": "spine-1", "b_port": "2"}]
        book = _shared_strings_workbook(tmp_path / f"counted{prefix}.xlsx", filler=400_000, prefix=prefix)
        with zipfile.ZipFile(book) as z:
            assert z.getinfo("xl/strings.xml").file_size > 6 * MiB  # several 1 MiB chunks, tags cut at their ends
            monkeypatch.setattr(sheets, "MAX_SHARED_STRINGS", 400_006)
            sheets._check_whole_parts(z, "counted.xlsx")  # every one counted once: at the limit, accepted
            monkeypatch.setattr(sheets, "MAX_SHARED_STRINGS", 400_005)
            with pytest.raises(sheets.SheetError, match="more than 400005 shared strings"):
                sheets._check_whole_parts(z, "counted.xlsx")


def test_a_shared_strings_part_over_its_size_is_refused_from_the_archives_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.site import sheets

    book = _shared_strings_workbook(tmp_path / "large.xlsx", filler=150_000)  # 2.4 MiB of XML
    monkeypatch.setattr(sheets, "MAX_SHARED_STRINGS_BYTES", 2 * MiB)
    with pytest.raises(sheets.SheetError, match=r"the shared strings \(xl/strings.xml\) expand to 2.4 MiB \(limit 2 MiB\)"):
        sheets.read_table(book, _ALIASES, tuple(_ALIASES))
