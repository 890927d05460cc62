"""PCIe link and InfiniBand checks, through the real collectors over fake /sys trees."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tools.health.collectors import ib_sysfs, pcie_links
from tools.health.errors import ParseError
from tools.health.ib import parse_ib_counters, parse_ib_firmware, parse_ib_ports, parse_inventory
from tools.health.outcome import CRITICAL, OK, WARN
from tools.health.pcie import parse_links, parse_pcie

from .conftest import expectations, realdata, replay_text
from .fakesys import FakeHca, FakePci, FakePort, hca_functions, make_ib, make_pci, two_hcas

IB = "expectations-h200x2-ib.json"
GPUS = [FakePci("0000:00:06.0", "0x10de", "0x030200", "nvidia"), FakePci("0000:00:07.0", "0x10de", "0x030200", "nvidia")]


def test_collector_reads_gpus_and_hcas_and_skips_other_devices(tmp_path: Path) -> None:
    make_pci(tmp_path, [*GPUS, *hca_functions(), FakePci("0000:00:1f.0", "0x8086", "0x060100", "lpc")])
    links = parse_links(pcie_links(tmp_path)[0])
    assert [(x.bdf, x.kind, x.gen_current, x.width_current) for x in links] == [
        ("0000:00:06.0", "gpu", 5, 16), ("0000:00:07.0", "gpu", 5, 16),
        ("0000:3b:00.0", "hca", 5, 16), ("0000:5e:00.0", "hca", 5, 16)]


def test_lent_h200_links_pass() -> None:
    assert parse_pcie(replay_text("h200x2-healthy", "pcie-links"), 0, expectations()).status == OK


@pytest.mark.realdata
def test_collector_format_matches_the_real_sysfs_capture() -> None:
    # The first capture on the lent machine read the same files with a shell loop.
    captured = realdata("h200x2-captured-2026-11-29/sys-pci-gpu-link.txt").split()
    ours = [json.loads(line) for line in replay_text("h200x2-healthy", "pcie-links").splitlines()[1:]]
    assert ours[0]["current_link_speed"] == " ".join(captured[1:4])
    assert "x" + ours[0]["current_link_width"] == captured[4]


def test_x4_gpu_link_is_critical() -> None:
    outcome = parse_pcie(replay_text("h200x2-pcie-x4", "pcie-links"), 0, expectations())
    assert (outcome.status, outcome.reason) == (CRITICAL, "pcie_width_x4")
    assert outcome.summary == "gpu 0000:00:07.0: x4 link, expected x16"


def test_idle_gpu_at_lower_speed_passes_but_slow_hca_does_not(tmp_path: Path) -> None:
    idle_gpu = FakePci("0000:00:06.0", "0x10de", "0x030200", "nvidia", speed="2.5 GT/s PCIe")
    slow_hca = FakePci("0000:3b:00.0", "0x15b3", "0x020700", "mlx5_core", speed="16.0 GT/s PCIe")
    make_pci(tmp_path, [idle_gpu, GPUS[1], slow_hca, hca_functions()[1]])
    outcome = parse_pcie(pcie_links(tmp_path)[0], 0, expectations(IB))
    assert (outcome.status, outcome.reason) == (WARN, "pcie_gen_degraded")
    assert outcome.summary == "hca 0000:3b:00.0: link trained at gen4, expected gen5"


# An HGX-style path: CPU root port, PCIe switch upstream port, switch downstream port, then the GPU.
GEN5, GEN4 = "32.0 GT/s PCIe", "16.0 GT/s PCIe"


def _hgx_gpu(bdf: str, speed: str, switch_uplink: str) -> FakePci:
    return FakePci(bdf, "0x10de", "0x030200", "nvidia", speed=speed,
                   bridges=(("0000:15:01.0", GEN5), ("0000:16:00.0", switch_uplink), ("0000:17:00.0", GEN5)))


def test_gpu_behind_a_gen4_hop_is_degraded_even_though_the_gpu_is_gen5_capable(tmp_path: Path) -> None:
    # The GPU's own max_link_speed says gen5 whatever slot it sits in; the gen4 switch uplink caps the path.
    make_pci(tmp_path, [_hgx_gpu("0000:18:00.0", GEN5, switch_uplink=GEN4)])
    outcome = parse_pcie(pcie_links(tmp_path)[0], 0, expectations(gpu={"count": 1}))
    assert (outcome.status, outcome.reason) == (WARN, "pcie_gen_degraded")
    assert outcome.summary == "gpu 0000:18:00.0: upstream port 0000:16:00.0 caps the path at gen4, expected gen5"


def test_idle_downtrained_gpu_behind_a_gen5_path_passes(tmp_path: Path) -> None:
    make_pci(tmp_path, [_hgx_gpu("0000:18:00.0", "2.5 GT/s PCIe", switch_uplink=GEN5)])
    text = pcie_links(tmp_path)[0]
    assert [p.bdf for p in parse_links(text)[0].upstream] == ["0000:17:00.0", "0000:16:00.0", "0000:15:01.0"]
    assert parse_pcie(text, 0, expectations(gpu={"count": 1})).status == OK


def test_hca_behind_a_gen4_hop_is_degraded(tmp_path: Path) -> None:
    hca = FakePci("0000:3b:00.0", "0x15b3", "0x020700", "mlx5_core", bridges=(("0000:3a:00.0", GEN4),))
    make_pci(tmp_path, [*GPUS, hca, hca_functions()[1]])
    outcome = parse_pcie(pcie_links(tmp_path)[0], 0, expectations(IB))
    assert outcome.summary == "hca 0000:3b:00.0: upstream port 0000:3a:00.0 caps the path at gen4, expected gen5"


def test_missing_hca_function_is_critical(tmp_path: Path) -> None:
    make_pci(tmp_path, GPUS)
    outcome = parse_pcie(pcie_links(tmp_path)[0], 0, expectations(IB))
    assert (outcome.status, outcome.reason) == (CRITICAL, "pcie_function_missing")


def test_ib_collector_output_is_what_the_replay_fixture_holds(tmp_path: Path) -> None:
    make_ib(tmp_path, two_hcas(port_down=True))
    assert ib_sysfs(tmp_path)[0] == replay_text("h200x2-ib-port-down", "ib-sysfs")


def test_ib_healthy_and_port_down() -> None:
    exp = expectations(IB)
    healthy = replay_text("h200x2-ib-healthy", "ib-sysfs")
    for parse in (parse_ib_ports, parse_ib_counters, parse_ib_firmware):
        assert parse(healthy, 0, exp).status == OK
    down = parse_ib_ports(replay_text("h200x2-ib-port-down", "ib-sysfs"), 0, exp)
    assert (down.status, down.reason) == (CRITICAL, "ib_port_down")
    assert down.evidence[0] == "mlx5_1/1: DOWN (Polling)"


def test_ib_rate_counters_firmware_and_missing_hca(tmp_path: Path) -> None:
    exp = expectations(IB)
    degraded = FakePort(rate="200 Gb/sec (2X NDR)", counters={"symbol_error": 17, "link_downed": 2})
    make_ib(tmp_path, [FakeHca("mlx5_0", "0000:3b:00.0", fw_ver="28.36.1010"),
                       FakeHca("mlx5_1", "0000:5e:00.0", ports=[degraded])])
    text = ib_sysfs(tmp_path)[0]
    assert parse_ib_ports(text, 0, exp).reason == "ib_rate_degraded"
    counters = parse_ib_counters(text, 0, exp)
    assert (counters.status, counters.evidence) == (WARN, ("mlx5_1/1 symbol_error=17", "mlx5_1/1 link_downed=2"))
    assert parse_ib_firmware(text, 0, exp).evidence == ("mlx5_0: 28.36.1010, site allows 28.39.1002",)
    three = expectations(IB, ib={"hca_count": 3})
    assert parse_ib_ports(text, 0, three).reason == "ib_hca_missing"


def test_host_without_infiniband_class_reports_zero_hcas(tmp_path: Path) -> None:
    text = ib_sysfs(tmp_path)[0]
    assert parse_inventory(text).hcas == ()
    assert parse_ib_ports(text, 0, expectations(IB)).reason == "ib_hca_missing"


def test_ethernet_ports_do_not_count_as_ib(tmp_path: Path) -> None:
    make_ib(tmp_path, [FakeHca("mlx5_0", "0000:3b:00.0"),
                       FakeHca("mlx5_1", "0000:5e:00.0", ports=[FakePort(link_layer="Ethernet")])])
    assert parse_ib_ports(ib_sysfs(tmp_path)[0], 0, expectations(IB)).reason == "ib_port_down"


def test_dump_with_a_missing_row_is_refused() -> None:
    lines = replay_text("h200x2-ib-healthy", "ib-sysfs").splitlines()
    with pytest.raises(ParseError, match="announces 2 rows, dump holds 1"):
        parse_inventory("\n".join(lines[:-1]) + "\n")


def test_ib_remediation_names_only_commands_that_exist(tmp_path: Path) -> None:
    from fabric.cli import app

    fabric_commands = {c.name or c.callback.__name__ for c in app.registered_commands if c.callback} | {
        g.name for g in app.registered_groups}
    exp = expectations(IB)
    make_ib(tmp_path, [FakeHca("mlx5_0", "0000:3b:00.0", ports=[FakePort(counters={"symbol_error": 3})]),
                       FakeHca("mlx5_1", "0000:5e:00.0", ports=[FakePort("1: DOWN", "2: Polling")])])
    text = ib_sysfs(tmp_path)[0]
    outcomes = [parse_ib_ports(text, 0, exp), parse_ib_counters(text, 0, exp)]
    assert [o.reason for o in outcomes] == ["ib_port_down", "ib_errors"]
    for outcome in outcomes:
        named = re.findall(r"\bfabric ([a-z][a-z-]*)", outcome.remediation)
        assert set(named) <= fabric_commands, (outcome.reason, named)
    assert "`fabric validate --site <site file> --live`" in outcomes[0].remediation and "`iblinkinfo`" in outcomes[0].remediation
    assert "`perfquery -x -R`" in outcomes[1].remediation
