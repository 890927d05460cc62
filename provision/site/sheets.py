"""Read a partner's spreadsheet (.xlsx workbook or .csv) as rows of named fields, as it comes.

What a datacenter sends is rarely a clean table: a title block above the header, blank rows between
racks, a device name merged down over the cables it carries, a second sheet of notes, headers in the
partner's own words. `read_table` finds the header row on each sheet (the first row naming every
required field), maps headers to fields by alias or by an explicit column mapping (`--columns
"a=Server,a_port=Srv Port"` or a YAML/JSON mapping file), fills merged cells with their top-left value,
skips blank rows, and numbers every row by its real sheet row (or CSV line) so a problem names
`sheet 'Cabling' row 14`. A sheet with no such header is reported in `skipped`, never dropped silently.

Workbooks are read with openpyxl (not pandas: pandas' read_excel leaves merged cells empty, and it would
add ~70 MB of install for nothing the reader needs). Inputs are bounded: the file's size, the workbook's
uncompressed XML (a zip bomb is refused before it is parsed), rows and columns per sheet, merged ranges. A
workbook is streamed (openpyxl's read-only mode): a sheet's declared dimension and merged ranges are checked
before any row is read or any merged cell filled, and rows are counted as they stream. The parts openpyxl
loads whole even then are bounded from the archive first: the shared strings (every text cell's text, one
Python string each: their part's size, and their count, found by scanning its bytes), the styles and the
content types.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from provision.errors import BringupError
from provision.site.bounded import InputRefused, load_yaml, read_bytes


class SheetError(BringupError):
    """A partner's sheet (or a column mapping for one) could not be read; carries every problem found."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        head = f"{path}: {problems[0]}" if len(problems) == 1 else f"{path}: {len(problems)} problems"
        super().__init__("\n".join([head] + ([f"  {p}" for p in problems] if len(problems) > 1 else [])))


MiB = 1024 * 1024
MAX_SHEET_FILE_BYTES = 32 * MiB
MAX_XLSX_EXPANDED_BYTES = 256 * MiB
MAX_ROWS = 200_000
MAX_COLUMNS = 256
MAX_MERGED_RANGES = 50_000
# Parts openpyxl reads whole in read-only mode. A 200,000-row cabling sheet has a few hundred thousand
# distinct texts at most; each costs a Python string (~60 bytes and up) when loaded.
MAX_SHARED_STRINGS = 1_000_000
MAX_SHARED_STRINGS_BYTES = 64 * MiB
MAX_WHOLE_PART_BYTES = 16 * MiB  # [Content_Types].xml, xl/styles.xml
_SHARED_STRINGS_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"
# an <si> start tag: counted with bytes.count (a regex match object each costs 6 times as much), and with a
# regex only where a namespace prefix is in use (<x:si>)
_ITEM_TAGS = (b"<si>", b"<si ", b"<si/", b"<si\n", b"<si\r", b"<si\t")
_PREFIXED_ITEM = re.compile(rb"<[A-Za-z_][\w.-]{0,64}:si[\s/>]")
_LONGEST_ITEM_TAG = 72
HEADER_SEARCH_ROWS = 50
XLSX_SUFFIXES = (".xlsx", ".xlsm")


@dataclass(frozen=True)
class SheetRow:
    """One data row: its sheet (None for CSV), its real row number, its fields and its raw cells."""

    sheet: str | None
    row: int
    fields: dict[str, str]
    raw: tuple[str, ...]

    def where(self) -> str:
        return f"sheet {self.sheet!r} row {self.row}" if self.sheet is not None else f"row {self.row}"


@dataclass
class Table:
    rows: list[SheetRow] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # sheets without a header naming the required fields


def header_key(text: str) -> str:
    """A header as compared: lower case, letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def parse_columns(spec: str, fields: Iterable[str]) -> dict[str, str]:
    """`field=Header,field=Header` into {field: header}; an unknown field fails naming the known ones."""
    known = set(fields)
    mapping: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, sep, header = part.partition("=")
        if not sep or not header.strip():
            raise SheetError("--columns", [f"{part!r} is not field=Header"])
        if name.strip() not in known:
            raise SheetError("--columns", [f"unknown field {name.strip()!r}: one of {', '.join(sorted(known))}"])
        mapping[name.strip()] = header.strip()
    return mapping


def load_column_mapping(path: Path, fields: Iterable[str]) -> dict[str, str]:
    """A mapping file: YAML or JSON object {field: header}."""
    try:
        data = load_yaml(read_bytes(path, limit=MiB, what="column mapping").decode("utf-8", "replace"))
    except InputRefused as e:
        raise SheetError(str(path), [str(e)]) from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise SheetError(str(path), ["a column mapping is an object of field: header name"])
    return parse_columns(",".join(f"{k}={v}" for k, v in data.items()), fields)


def read_table(path: Path, aliases: Mapping[str, set[str]], required: tuple[str, ...],
               columns: Mapping[str, str] | None = None, sheet: str | None = None) -> Table:
    """Every data row of the file (every sheet of a workbook, or just `sheet`)."""
    try:
        data = read_bytes(path, limit=MAX_SHEET_FILE_BYTES, what="spreadsheet")
    except InputRefused as e:
        raise SheetError(str(path), [str(e)]) from None
    if path.suffix.lower() in XLSX_SUFFIXES:
        grids = _xlsx_grids(data, str(path), sheet)
    else:
        grids = [(None, csv_grid(data, str(path)))]
    return table_from_grids(grids, aliases, required, columns or {}, str(path))


def read_csv_text(text: str, aliases: Mapping[str, set[str]], required: tuple[str, ...],
                  source: str, columns: Mapping[str, str] | None = None) -> Table:
    return table_from_grids([(None, csv_grid(text.encode(), source))], aliases, required, columns or {}, source)


Grid = list[tuple[int, list[str]]]


def table_from_grids(grids: list[tuple[str | None, Grid]], aliases: Mapping[str, set[str]],
                     required: tuple[str, ...], columns: Mapping[str, str], source: str) -> Table:
    table = Table()
    for name, grid in grids:
        found = _header(grid, aliases, required, columns)
        if found is None:
            where = f"sheet {name!r}" if name is not None else source
            table.skipped.append(f"{where}: header lacks columns for {', '.join(required)} (no row among "
                                 f"the first {HEADER_SEARCH_ROWS} names them all; map the partner's headers "
                                 "with --columns field=Header)")
            continue
        at, mapping = found
        for number, cells in grid[at + 1:]:
            if not any(c for c in cells):
                continue
            values = {f: (cells[i] if i < len(cells) else "") for i, f in mapping.items()}
            table.rows.append(SheetRow(name, number, values, tuple(cells)))
    if not table.rows and table.skipped:
        raise SheetError(source, table.skipped)
    return table


def _header(grid: Grid, aliases: Mapping[str, set[str]], required: tuple[str, ...],
            columns: Mapping[str, str]) -> tuple[int, dict[int, str]] | None:
    """The index of the first row naming every required field, and {column index: field}."""
    by_key = {header_key(a): f for f, names in aliases.items() for a in names}
    explicit = {header_key(h): f for f, h in columns.items()}
    for at, (_, cells) in enumerate(grid[:HEADER_SEARCH_ROWS]):
        mapping: dict[int, str] = {}
        for i, cell in enumerate(cells):
            k = header_key(cell)
            f = explicit.get(k)
            if f is None and by_key.get(k) not in columns:
                f = by_key.get(k)
            if f and f not in mapping.values():
                mapping[i] = f
        if all(f in mapping.values() for f in required):
            return at, mapping
    return None


def csv_grid(data: bytes, source: str) -> Grid:
    if b"\x00" in data:
        raise SheetError(source, ["binary data: expected a CSV file (or give a .xlsx workbook its suffix)"])
    text = data.decode("utf-8-sig", "replace")
    reader = csv.reader(io.StringIO(text))
    grid: Grid = []
    try:
        line = 1
        for cells in reader:
            if len(grid) >= MAX_ROWS:
                raise SheetError(source, [f"more than {MAX_ROWS} rows"])
            grid.append((line, [c.strip() for c in cells[:MAX_COLUMNS]]))
            line = reader.line_num + 1
    except csv.Error as e:
        raise SheetError(source, [f"not CSV: {e}"]) from None
    if not grid:
        raise SheetError(source, ["empty CSV"])
    return grid


def _xlsx_grids(data: bytes, source: str, only: str | None) -> list[tuple[str | None, Grid]]:
    """Every sheet's grid, read without expanding anything first: the workbook is opened read-only (rows are
    streamed), each sheet's declared dimension and merged ranges are checked against the limits before a row
    is read, and its rows are counted as they stream (a sheet may declare no dimension, or a false one)."""
    import openpyxl

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            expanded = sum(i.file_size for i in z.infolist())
            if expanded > MAX_XLSX_EXPANDED_BYTES:
                raise SheetError(source, [f"workbook expands to {expanded // MiB} MiB (limit "
                                           f"{MAX_XLSX_EXPANDED_BYTES // MiB} MiB)"])
            _check_whole_parts(z, source)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, OSError) as e:
        what = "not a zip archive" if isinstance(e, zipfile.BadZipFile) else f"{type(e).__name__}: {e}"
        raise SheetError(source, [f"not an .xlsx workbook ({what})"]) from None
    try:
        wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as e:  # openpyxl raises many kinds for a damaged workbook
        raise SheetError(source, [f"unreadable workbook: {type(e).__name__}: {e}"]) from None
    try:
        names = wb.sheetnames
        if only is not None and only not in names:
            raise SheetError(source, [f"no sheet {only!r}: the workbook has {', '.join(map(repr, names))}"])
        grids: list[tuple[str | None, Grid]] = []
        for name in ([only] if only is not None else names):
            grids.append((name, _sheet_grid(wb[name], source)))
        return grids
    except SheetError:
        raise
    except Exception as e:  # a damaged sheet part shows only when it is streamed
        raise SheetError(source, [f"unreadable workbook: {type(e).__name__}: {e}"]) from None
    finally:
        wb.close()


def _part_size(z: zipfile.ZipFile, name: str, limit: int, source: str, what: str) -> bool:
    """Whether the archive has `name`; refused when it expands past `limit` (zipfile reads no more than the
    size the archive declares, so the declared size bounds what openpyxl gets)."""
    try:
        size = z.getinfo(name).file_size
    except KeyError:
        return False
    if size > limit:
        raise SheetError(source, [f"{what} ({name}) expand to {size / MiB:.1f} MiB (limit {limit // MiB} MiB)"])
    return True


def _shared_strings_part(z: zipfile.ZipFile, source: str) -> str | None:
    """The shared strings' part name, as openpyxl finds it: `[Content_Types].xml`'s override of that type."""
    from openpyxl.packaging.manifest import Manifest
    from openpyxl.xml.functions import fromstring

    if not _part_size(z, "[Content_Types].xml", MAX_WHOLE_PART_BYTES, source, "the content types"):
        return None  # openpyxl says what is wrong with such an archive
    found = Manifest.from_tree(fromstring(z.read("[Content_Types].xml"))).find(_SHARED_STRINGS_TYPE)
    return None if found is None else str(found.PartName)[1:]  # as openpyxl opens it


def _check_whole_parts(z: zipfile.ZipFile, source: str) -> None:
    """Refuse a workbook whose parts openpyxl loads whole are over their bounds: the styles' and the shared
    strings' size, and how many shared strings there are, counted on the part's bytes as they stream."""
    _part_size(z, "xl/styles.xml", MAX_WHOLE_PART_BYTES, source, "the styles")
    try:
        part = _shared_strings_part(z, source)
    except SheetError:
        raise
    except Exception:  # openpyxl raises many kinds for a damaged manifest: it reports it when it loads
        return
    if part is None or not _part_size(z, part, MAX_SHARED_STRINGS_BYTES, source, "the shared strings"):
        return
    count, carry = 0, b""
    with z.open(part) as stream:
        while count <= MAX_SHARED_STRINGS:
            chunk = stream.read(MiB)
            text = carry + chunk
            cut = text.rfind(b"<")  # a tag the chunk's end may have cut is counted with the next chunk
            if not chunk or cut < 0 or len(text) - cut > _LONGEST_ITEM_TAG:
                cut = len(text)
            count += sum(text.count(tag, 0, cut) for tag in _ITEM_TAGS)
            if b":si" in text:
                count += len(_PREFIXED_ITEM.findall(text, 0, cut))
            carry = text[cut:]
            if not chunk:
                break
    if count > MAX_SHARED_STRINGS:
        raise SheetError(source, [f"the workbook has more than {MAX_SHARED_STRINGS} shared strings ({part}): "
                                   f"refused before loading them"])


def _cell_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


Merge = tuple[int, int, int, int]  # min_row, min_col, max_row, max_col


def _too_big(title: str, rows: object, columns: object) -> str:
    return f"sheet {title!r} is {rows} rows x {columns} columns (limit {MAX_ROWS} x {MAX_COLUMNS})"


def _merged_ranges(ws: object, source: str) -> list[Merge]:
    """The sheet's merged ranges, read by streaming its XML (read-only worksheets do not load them); a range
    past the row or column limit, or more ranges than MAX_MERGED_RANGES, is refused before anything is filled."""
    from openpyxl.utils.cell import range_boundaries
    from openpyxl.worksheet._read_only import ReadOnlyWorksheet
    from openpyxl.xml.functions import iterparse

    assert isinstance(ws, ReadOnlyWorksheet)
    out: list[Merge] = []
    rows = 0
    with ws._get_source() as src:
        for _, element in iterparse(src):
            tag = element.tag.rsplit("}", 1)[-1]
            if tag == "row":
                rows += 1
                if rows > MAX_ROWS:
                    raise SheetError(source, [f"sheet {ws.title!r} has more than {MAX_ROWS} rows"])
            elif tag == "mergeCell":
                ref = element.get("ref") or ""
                try:
                    min_col, min_row, max_col, max_row = range_boundaries(ref)
                except (TypeError, ValueError):
                    raise SheetError(source, [f"sheet {ws.title!r}: bad merged range {ref[:40]!r}"]) from None
                if max_row is None or max_col is None or max_row > MAX_ROWS or max_col > MAX_COLUMNS:
                    raise SheetError(source, [f"sheet {ws.title!r}: merged range {ref[:40]} is past the limit "
                                               f"of {MAX_ROWS} rows x {MAX_COLUMNS} columns"])
                out.append((min_row or 1, min_col or 1, max_row, max_col))
                if len(out) > MAX_MERGED_RANGES:
                    raise SheetError(source, [f"sheet {ws.title!r} has more than {MAX_MERGED_RANGES} merged ranges"])
            if tag != "mergeCells":
                element.clear()  # constant memory however long the sheet
    return sorted(out)


def _sheet_grid(ws: object, source: str) -> Grid:
    from openpyxl.worksheet._read_only import ReadOnlyWorksheet

    assert isinstance(ws, ReadOnlyWorksheet)
    declared_rows, declared_columns = ws.max_row, ws.max_column  # the sheet's <dimension>, when it has one
    if (declared_rows or 0) > MAX_ROWS or (declared_columns or 0) > MAX_COLUMNS:
        raise SheetError(source, [_too_big(ws.title, declared_rows, declared_columns)])
    merges = _merged_ranges(ws, source)
    ws.reset_dimensions()  # stream every row there is, not only those the dimension declares
    pending, active = iter(merges), []  # ranges not reached yet (by top row), ranges running through this row
    upcoming = next(pending, None)
    tops: dict[Merge, str] = {}
    grid: Grid = []
    for r, row in enumerate(ws.iter_rows(values_only=True), start=1):
        if r > MAX_ROWS or len(row) > MAX_COLUMNS:
            raise SheetError(source, [_too_big(ws.title, f"more than {MAX_ROWS}" if r > MAX_ROWS else r, len(row))])
        own = [_cell_text(v) for v in row]
        while upcoming is not None and upcoming[0] <= r:
            active.append(upcoming)
            upcoming = next(pending, None)
        active = [m for m in active if m[2] >= r]
        for m in active:
            if m[0] == r:
                tops[m] = own[m[1] - 1] if m[1] <= len(own) else ""
        if not any(own):  # a row blank but for a merged cell running through it (a rack name merged down) stays blank
            grid.append((r, []))
            continue
        for m in active:
            for c in range(m[1], min(m[3], len(own)) + 1):
                own[c - 1] = tops.get(m, "")
        grid.append((r, own))
    return grid


def mapping_from_option(columns: str | None, columns_file: Path | None, fields: Iterable[str]) -> dict[str, str]:
    """--columns and/or --columns-file into one mapping (the option wins over the file)."""
    fields = list(fields)
    mapping = load_column_mapping(columns_file, fields) if columns_file else {}
    mapping.update(parse_columns(columns, fields) if columns else {})
    return mapping

