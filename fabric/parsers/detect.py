"""Pick the parser for a capture by looking at its content."""

from __future__ import annotations

import re

from fabric.errors import ParseError
from fabric.parsers.common import split_lines
from fabric.parsers.iblinkinfo import parse_iblinkinfo
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover, parse_ibnetdiscover_ports
from fabric.parsers.ufm import parse_ufm_links
from fabric.topology import Topology

FORMATS = ("ibnetdiscover", "ibnetdiscover-p", "iblinkinfo", "ufm-links")
_PORTS = re.compile(r"^(SW|CA|RT)\s+\d+\s+\d+\s+0x[0-9a-fA-F]+\s+\d+x")
_NODE = re.compile(r'^(Switch|Ca)\s*\d+\s*"')
_LINK = re.compile(r"==\(.*\)==>")


def sniff_format(text: str, source: str = "capture") -> str:
    body = text.lstrip()
    if body[:1] == "{" or re.match(r"^\[\s*(\{|\])", body):
        return "ufm-links"
    for line in split_lines(text[:200_000], source)[:400]:
        s = line.strip()
        if s.startswith(("vendid=", "switchguid=", "caguid=")) or _NODE.match(s):
            return "ibnetdiscover"
        if _PORTS.match(s):
            return "ibnetdiscover-p"
        if _LINK.search(s):
            return "iblinkinfo"
    return "ibnetdiscover"


def parse_any(text: str, source: str = "capture", fmt: str = "auto") -> Topology:
    if fmt == "auto":
        fmt = sniff_format(text, source)
    if fmt == "ibnetdiscover":
        return parse_ibnetdiscover(text, source)
    if fmt == "ibnetdiscover-p":
        return parse_ibnetdiscover_ports(text, source)
    if fmt == "iblinkinfo":
        return parse_iblinkinfo(text, source)
    if fmt == "ufm-links":
        return parse_ufm_links(text, source=source)
    raise ParseError(source, None, f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
