"""The LFT reader's fast path (a table shaped like one already read is taken from its port digits) gives what
reading each table line by line gives, and falls back to the line reader, with its exact warnings and
errors, for anything else. Tables: the real dump_lfts of the embedded site (tests/fixtures/fabric/burnin)."""

from __future__ import annotations

import pytest

from fabric.burnin.lft import NO_PORT, LftDump, parse_lfts
from fabric.errors import ParseError
from tests.fabric.burnin.helpers import text

DUMP = text("sim-site.ftree.dump_lfts.txt")


def _tables(dump: str) -> list[str]:
    parts = dump.split("Unicast lids")
    return ["Unicast lids" + p for p in parts[1:]]


def _ports(dump: LftDump) -> dict[str, bytes]:
    return {g: t.out_ports for g, t in dump.switches.items()}


def test_every_table_read_fast_is_what_it_reads_alone() -> None:
    whole = parse_lfts(DUMP.encode())
    alone: dict[str, bytes] = {}
    for table in _tables(DUMP):  # each the first of its shape: read line by line
        alone.update(_ports(parse_lfts(table)))
    assert _ports(whole) == alone and len(alone) == 12 and not whole.warnings
    assert parse_lfts(DUMP.replace("\n", "\r\n")).switches == whole.switches  # a terminal capture


def test_a_cut_entry_in_a_later_table_is_a_warning_at_its_line_and_the_rest_is_read() -> None:
    lines = DUMP.split("\n")
    target = [i for i, ln in enumerate(lines) if ln.startswith("0x0010 ")][6]  # in the 7th table
    lines[target] = lines[target][:20]
    dump = parse_lfts("\n".join(lines))
    assert any(w.startswith(f"lfts:{target + 1}: malformed forwarding entry ignored") for w in dump.warnings)
    assert len(dump.truncated) == 1 and sum(t.entries for t in dump.switches.values()) == \
        sum(t.entries for t in parse_lfts(DUMP).switches.values()) - 1


@pytest.mark.parametrize("port", ["255", "299", "9x9"])
def test_a_port_out_of_range_in_a_later_table_is_refused_at_its_line(port: str) -> None:
    lines = DUMP.split("\n")
    target = [i for i, ln in enumerate(lines) if ln.startswith("0x0011 ")][5]
    lines[target] = lines[target][:7] + port + lines[target][10:]
    if port == "9x9":
        dump = parse_lfts("\n".join(lines))
        assert any(w.startswith(f"lfts:{target + 1}: malformed") for w in dump.warnings)
        return
    with pytest.raises(ParseError, match=f"line {target + 1}|:{target + 1}"):
        parse_lfts("\n".join(lines))


def test_a_later_table_naming_another_destination_is_read_line_by_line() -> None:
    tables = _tables(DUMP)
    tables[4] = tables[4].replace("'gpu-r1-01 mlx5_0'", "'gpu-r1-01 mlx5_0 '", 1)
    dump = parse_lfts("".join(tables))
    assert _ports(dump) == _ports(parse_lfts(DUMP)) and not dump.warnings


def test_a_later_table_routing_fewer_lids_is_read_as_it_reads_alone() -> None:
    tables = _tables(DUMP)
    lines = tables[5].split("\n")
    dropped = [ln for ln in lines if not ln.startswith(("0x0003 ", "0x0004 "))]
    footer = next(i for i, ln in enumerate(dropped) if "valid lids dumped" in ln)
    dropped[footer] = f"{int(dropped[footer].split()[0]) - 2} valid lids dumped "
    tables[5] = "\n".join(dropped)
    dump = parse_lfts("".join(tables))
    alone = parse_lfts(tables[5])
    [guid] = alone.switches
    assert dump.switches[guid].out_ports == alone.switches[guid].out_ports and dump.switches[guid].complete
    assert dump.switches[guid].out_ports[3] == NO_PORT and not dump.warnings
