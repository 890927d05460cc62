"""The parsers on real captures (../shared/realdata/1_infiniband)."""

from __future__ import annotations

import pytest

from fabric.errors import ParseError
from fabric.parsers import parse_any, parse_iblinkinfo, parse_ibnetdiscover, sniff_format
from fabric.topology import End, NodeType
from tests.fabric.conftest import realdata_text

pytestmark = pytest.mark.realdata

SELENE = "ibnetdiscover__Mellanox-ufm_sdk_3.0__topo_selene.compute.txt"
H100 = "ibnetdiscover__NVIDIA-topograph__tests_output_ibnetdiscover_example.out"
PUTTY = "ibnetdiscover__Mellanox-ufm_sdk_3.0__UFM_NDT_Plugin_tests_ibnetdiscover_director.txt"
REDACTED = "ibnetdiscover-partial__blog-ib-perf-test-2024-07-19__QM9700-129port-2xNDR-redacted.txt"
SHARP = "iblinkinfo__blog-NVIDIA-Sharp-2022-02-07__cu-cluster-QM8700-HDR.txt"
DEGRADED = "ibswitches-ibhosts-iblinkinfo__doc-ubuntu-QM8700-Quantum__degraded-EDR-links.txt"


def test_selene_counts_every_switch_ca_and_link() -> None:
    top = parse_ibnetdiscover(realdata_text(SELENE))
    assert len(top.switches()) == 666
    assert len(top.cas()) == 4341
    assert len(top.links) == 12852
    assert not top.conflicts and not top.warnings
    assert {link.width for link in top.links} == {"4X"} and {link.speed for link in top.links} == {"HDR"}


def test_dgx_h100_superpod_ndr_links_and_descriptions() -> None:
    top = parse_ibnetdiscover(realdata_text(H100))
    assert {link.speed for link in top.links} == {"NDR"}
    leaf = next(n for n in top.switches() if n.description == "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1")
    assert leaf.guid == "2c5eab0300b87b40" and leaf.nports == 65
    peer = top.peer(End(leaf.guid, 1))
    assert peer is not None and top.nodes[peer.guid].description == "a08-p1-dgx-04-c01 mlx5_5"


def test_putty_capture_without_tabs_with_crlf_and_unconfigured_lids() -> None:
    top = parse_ibnetdiscover(realdata_text(PUTTY))
    assert len(top.switches()) > 100 and len(top.links) > 8000
    sw = top.nodes["0c42a10300a9b026"]  # `Switch41 "S-0c42..."#` in the capture
    assert sw.type is NodeType.SWITCH and sw.nports == 41 and sw.lid == 3894
    host = top.peer(End("0c42a10300a9b026", 1))
    assert host is not None and top.nodes[host.guid].description == "SAT111092710053 ibp11s0f0"
    # the PuTTY header and the trailing shell prompt are reported, not dropped silently
    assert any(":1: not ibnetdiscover output" in w for w in top.warnings)
    assert any("(config)" in w for w in top.warnings)


def test_stderr_noise_line_is_a_warning_with_its_line_number() -> None:
    top = parse_ibnetdiscover(realdata_text("ibnetdiscover__junousi-ibtopotool__tests_3.topo"))
    assert len(top.switches()) == 2
    assert any(w.startswith("ibnetdiscover:1: not ibnetdiscover output") and "query_smp.c" in w
               for w in top.warnings)
    # a switch cabled to itself (loopback ports 1<->2) is a link like any other
    assert top.peer(End("e41d2d030003e470", 1)) == End("e41d2d030003e470", 2)


def test_redacted_partial_capture_is_parsed_as_far_as_it_goes() -> None:
    top = parse_ibnetdiscover(realdata_text(REDACTED))
    assert len(top.links) == 5
    assert {link.width for link in top.links} == {"2X"} and {link.speed for link in top.links} == {"NDR"}
    assert any("...omitted" in w for w in top.warnings)
    assert any("redacted" in w for w in top.warnings)
    assert not top.conflicts  # redacted GUIDs are keyed by description, not taken for duplicates


def test_lone_ca_without_switch() -> None:
    top = parse_ibnetdiscover(realdata_text("ibnetdiscover__NVIDIA-topograph__tests_output_ibnetdiscover_example-bad.out"))
    assert [n.description for n in top.nodes.values()] == ["dgx-gb200-n01-c1 HCA-1"]
    assert top.links == ()


def test_iblinkinfo_resolves_peers_by_lid_and_records_polling_ports() -> None:
    text = realdata_text(SHARP)
    assert sniff_format(text) == "iblinkinfo"
    top = parse_iblinkinfo(text)
    assert len(top.switches()) == 1 and len(top.links) == 22
    assert len(top.down_ports) == 19 and {d.state for d in top.down_ports} == {"Down/Polling"}
    peer = top.peer(End("0c42a103008982a4", 40))
    assert peer is not None and top.nodes[peer.guid].description == "cu01 HCA-1"


def test_iblinkinfo_could_be_annotation_and_unknown_peer_lid() -> None:
    top = parse_iblinkinfo(realdata_text(DEGRADED))
    slow = [link for link in top.links if link.speed == "EDR"]
    assert len(slow) == 4 and {link.could_be for link in slow} == {"HDR"}
    # `iblinkinfo -S` shows one switch: its peers are known by LID only
    assert any("placeholder 'lid-4'" in w for w in top.warnings)
    assert top.peer(End("08c0eb0300add04e", 40)) == End("lid-4", 40)


def test_ibdiagnet_fragment_is_not_a_capture() -> None:
    with pytest.raises(ParseError) as e:
        parse_any(realdata_text("ibdiagnet2-summary-fragment__github-ufm-config-notes__AR-dump_only.txt"), "frag")
    assert "frag:1: expected a node line" in str(e.value)
