"""The four tool formats agree on the same (simulated) fabric; UFM JSON; malformed input."""

from __future__ import annotations

import json

import pytest

from fabric.errors import ParseError
from fabric.parsers import parse_any, parse_ibnetdiscover, parse_ibnetdiscover_ports, sniff_format
from fabric.parsers.ufm import parse_ufm_links
from fabric.topology import End, NodeType
from tests.fabric.conftest import fixture_text

FORMATS = {
    "ibsim-sim-site.ibnetdiscover.txt": "ibnetdiscover",
    "ibsim-sim-site.ibnetdiscover-p.txt": "ibnetdiscover-p",
    "ibsim-sim-site.iblinkinfo.txt": "iblinkinfo",
    "ibsim-sim-site.iblinkinfo-l.txt": "iblinkinfo",
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_format_is_recognised_and_sees_the_same_fabric(name: str) -> None:
    text = fixture_text(name)
    assert sniff_format(text) == FORMATS[name]
    top = parse_any(text, name)
    assert len(top.switches()) == 12
    assert len(top.cas()) == 129
    assert len(top.links) == 288  # 289 designed, one unplugged
    degraded = [link for link in top.links if link.width == "1X"]
    assert len(degraded) == 1 and degraded[0].speed == "HDR"


def test_only_iblinkinfo_reports_the_unplugged_ports_as_polling() -> None:
    down = parse_any(fixture_text("ibsim-sim-site.iblinkinfo.txt")).down_ports
    assert End("0c42a10300000010", 21) in {d.end for d in down}
    assert parse_any(fixture_text("ibsim-sim-site.ibnetdiscover.txt")).down_ports == ()


def test_ports_report_uses_port_guids_for_cas() -> None:
    top = parse_ibnetdiscover_ports(fixture_text("ibsim-sim-site.ibnetdiscover-p.txt"))
    ca = next(n for n in top.cas() if n.description == "gpu-r1-01 mlx5_0")
    assert ca.guid == "b8599f0300000001"  # node GUID ...00 + port 1


def test_ufm_links_with_systems() -> None:
    top = parse_ufm_links(fixture_text("ufm-links.json"), fixture_text("ufm-systems.json"))
    assert top.nodes["0c42a10300000000"].type is NodeType.SWITCH
    assert top.nodes["b8599f0300000010"].type is NodeType.CA  # from its HCA-2/1 port name
    assert top.nodes["0c42a10300000010"].description == "leaf-A-r3-U38"  # ':21' port suffix removed
    link = top.by_end[End("0c42a10300000010", 21)]
    assert (link.width, link.speed) == ("1X", "HDR")
    assert sniff_format(fixture_text("ufm-links.json")) == "ufm-links"


def test_ufm_entries_missing_fields_are_skipped_with_a_warning() -> None:
    entries = json.loads(fixture_text("ufm-links.json"))
    del entries[0]["destination_guid"]
    top = parse_ufm_links(json.dumps(entries))
    assert len(top.links) == 3
    assert any("entry 0: missing destination_guid" in w for w in top.warnings)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty input"),
        ("\x00\x01binary", "binary data"),
        ("hello\nworld\n", ":1: expected a node line"),
        ('{"links": 3}', "expected a JSON list of UFM link objects"),
        ("[{]", "not JSON"),
        ('[{"source_guid": "1"}]', "no usable link objects"),
    ],
)
def test_malformed_input_error_names_the_line_and_what_was_expected(text: str, message: str) -> None:
    with pytest.raises(ParseError) as e:
        parse_any(text, "cap")
    assert message in str(e.value)


def test_two_concatenated_captures_are_refused_at_the_second_header() -> None:
    one = fixture_text("ibsim-sim-site.ibnetdiscover.txt")
    with pytest.raises(ParseError) as e:
        parse_ibnetdiscover(one + one, "cat")
    assert f"cat:{one.count(chr(10)) + 2}: a second ibnetdiscover capture starts here" in str(e.value)


def test_crlf_and_truncation_keep_what_was_read() -> None:
    text = fixture_text("ibsim-sim-site.ibnetdiscover.txt")
    crlf = parse_ibnetdiscover(text.replace("\n", "\r\n"))
    assert len(crlf.links) == 288 and not crlf.warnings
    cut = text[: len(text) // 2]
    cut = cut[: cut.rindex("[") + 12]  # ends mid port line
    top = parse_ibnetdiscover(cut)
    assert 0 < len(top.links) < 288
    assert any("expected a port line ending in" in w for w in top.warnings)


def test_same_port_claimed_by_two_peers_is_a_guid_conflict() -> None:
    text = """\
Switch	4 "S-000000000000000a"		# "sw" enhanced port 0 lid 1 lmc 0
[1]	"H-00000000000000b1"[1](b2) 		# "h1 mlx5_0" lid 2 4xHDR
[2]	"H-00000000000000b1"[1](b2) 		# "h2 mlx5_0" lid 3 4xHDR

Ca	1 "H-00000000000000b1"		# "h1 mlx5_0"
[1](b2) 	"S-000000000000000a"[1]		# lid 2 lmc 0 "sw" lid 1 4xHDR
"""
    top = parse_ibnetdiscover(text)
    assert [c.guid for c in top.conflicts] == ["00000000000000b1"]
    assert End("000000000000000a", 2) in top.conflicts[0].claimants
