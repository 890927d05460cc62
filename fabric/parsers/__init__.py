"""Pure parsers from what a fabric reports (text) to a frozen `Topology`."""

from __future__ import annotations

from fabric.parsers.detect import parse_any, sniff_format
from fabric.parsers.iblinkinfo import parse_iblinkinfo
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover, parse_ibnetdiscover_ports
from fabric.parsers.ufm import parse_ufm_links

__all__ = [
    "parse_any",
    "parse_iblinkinfo",
    "parse_ibnetdiscover",
    "parse_ibnetdiscover_ports",
    "parse_ufm_links",
    "sniff_format",
]
