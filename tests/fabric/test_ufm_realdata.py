"""UFM REST parsers on real UFM responses (../shared/realdata/3_ufm)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fabric.errors import ParseError
from fabric.parsers.ufm import parse_ufm_links, parse_ufm_systems
from fabric.topology import NodeType

UFM = Path(__file__).resolve().parents[2] / ".." / "shared" / "realdata" / "3_ufm"
LINKS = "ufm-rest-links__docs.nvidia.com-ufmenterpriserestapiv6200-links-rest-api_NDR-sw-ufm-ndr03.json"


def _text(name: str) -> str:
    path = UFM / name
    if not path.is_file():
        pytest.skip(f"real UFM capture {name} not present (../shared/realdata is not checked out here)")
    return path.read_text()


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("name", "guid", "system_name"),
    [
        ("ufm-rest-resources-systems__IBM-CAST__csmtest_include_json_ufm_output_5_9.json", "248a070300fd6100",
         "c650f04ib-leaf02-M"),
        ("ufm-rest-resources-systems__IBM-CAST__csmtest_include_json_ufm_output_6_1.json", "248a0703006d4090",
         "c650f07ib-leaf03-M"),
    ],
)
def test_real_ufm_systems_name_their_switch(name: str, guid: str, system_name: str) -> None:
    systems = parse_ufm_systems(_text(name), name)
    assert systems == {guid: (NodeType.SWITCH, system_name)}


@pytest.mark.realdata
def test_the_vendor_links_example_with_its_trailing_comma_is_refused_with_the_line() -> None:
    with pytest.raises(ParseError, match=r"ufm links:21: not JSON"):
        parse_ufm_links(_text(LINKS))


@pytest.mark.realdata
def test_the_vendor_links_example_parses_once_the_comma_is_gone() -> None:
    topo = parse_ufm_links(re.sub(r",\s*\]\s*$", "]", _text(LINKS)))
    assert {n.description for n in topo.nodes.values()} == {"sw-ufm-ndr03", "sw-ufm-ndr04"}
    [link] = topo.links
    assert {(link.a.guid, link.a.port), (link.b.guid, link.b.port)} == {("900a840300ac8c40", 5), ("9c0591030085abc0", 5)}
    assert link.width == "4X"
