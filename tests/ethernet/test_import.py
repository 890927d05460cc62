"""`provision ethernet import`: the datacenter's NIC sheet (a workbook generated here in a partner's layout:
title row, merged rack column, blank row, the partner's own headers) into the Ethernet design."""

from __future__ import annotations

from pathlib import Path

import openpyxl
import pytest
import yaml

from provision.cli import main

SWITCHES = {"switches": {"tor-r1": {"platform": "cisco_nxos", "address": "10.0.0.1", "credential": "sw"}}}


def _sheet(path: Path, rows: list[list[object]]) -> Path:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "OOB"
    for row in rows:
        ws.append(row)
    ws.merge_cells("A3:A5")
    wb.save(path)
    return path


HEAD: list[object] = ["Rack", "Server", "iDRAC Switch", "iDRAC Port", "Data SW", "Data Port", "PXE MAC"]


def test_a_partner_sheet_with_a_mapping_becomes_the_designs_nics(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "base.yml").write_text(yaml.safe_dump(SWITCHES))
    book = _sheet(tmp_path / "nics.xlsx", [["Hall 3 OOB plan"], HEAD,
                                           ["r1", "gpu-r1-01", "tor-r1", "Eth1/1", "tor-r1", "Eth1/25", "0200.0000.0201"],
                                           [None, "gpu-r1-02", "tor-r1", "Eth1/2", "tor-r1", "Eth1/26", ""], [],
                                           [None, "gpu-r1-03", "tor-r1", "Eth1/3", "", "", ""]])
    out = tmp_path / "ethernet.yml"
    assert main(["ethernet", "import", str(book), "--switches-from", str(tmp_path / "base.yml"), "--columns",
                 "pxe_switch=Data SW,pxe_port=Data Port", "--out", str(out)]) == 0
    nics = yaml.safe_load(out.read_text())["nics"]
    assert nics["gpu-r1-01"] == {"bmc": {"switch": "tor-r1", "port": "Eth1/1"},
                                 "pxe": {"switch": "tor-r1", "port": "Eth1/25", "mac": "02:00:00:00:02:01"}}
    assert set(nics["gpu-r1-03"]) == {"bmc"}


def test_every_row_it_cannot_place_is_named_with_sheet_row_and_why(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "base.yml").write_text(yaml.safe_dump(SWITCHES))
    book = _sheet(tmp_path / "bad.xlsx", [["title"], HEAD,
                                          ["r1", "gpu-r1-01", "tor-r9", "Eth1/1", "", "", ""],
                                          [None, "gpu-r1-01", "tor-r1", "Eth1/2", "", "", ""],
                                          [None, "gpu-r1-02", "", "", "tor-r1", "Eth1/26", "zz"]])
    assert main(["ethernet", "import", str(book), "--switches-from", str(tmp_path / "base.yml"), "--columns",
                 "pxe_switch=Data SW,pxe_port=Data Port"]) == 1
    err = capsys.readouterr().err
    assert "sheet 'OOB' row 3: BMC switch 'tor-r9' is not declared" in err
    assert "sheet 'OOB' row 5: PXE MAC 'zz' is not a MAC address" in err


def _rule_sheet(path: Path, site_file: Path, moved: str = "") -> tuple[Path, dict[str, tuple[str, str]]]:
    """A CSV of every GPU host of the site on its rack's switch at port U (BMC) and U+1 (PXE: the site's GPU
    hosts are 4U high), VLANs 10/20; `moved`'s PXE cable one port up."""
    from provision.ethernet.rule import port_name
    from provision.site import load_site

    site = load_site(site_file)
    rows, placed = ["host,bmc switch,bmc port,pxe switch,pxe port,bmc vlan,pxe vlan"], {}
    for rack in site.spec.racks:
        for h in (h for h in rack.hosts if h.role == "gpu"):
            sw = f"tor-{rack.name}"
            platform = site.spec.switches[sw].platform
            pxe = port_name(platform, h.u + 1 + (1 if h.hostname == moved else 0))
            rows.append(f"{h.hostname},{sw},{port_name(platform, h.u)},{sw},{pxe},10,20")
            placed[h.hostname] = (port_name(platform, h.u), pxe)
    path.write_text("\n".join(rows) + "\n")
    return path, placed


def test_a_sheet_that_follows_the_top_of_rack_rule_is_written_as_the_rule_and_loads_back_the_same(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from provision.ethernet.design import load_design
    from provision.ethernet.rule import site_positions
    from provision.site import load_site
    from tests.sites import copy_sim_site

    site_file = copy_sim_site(tmp_path / "site")
    sheet, placed = _rule_sheet(tmp_path / "nics.csv", site_file)
    out = tmp_path / "ethernet.yml"
    assert main(["ethernet", "import", str(sheet), "--site", str(site_file), "--out", str(out)]) == 0
    written = yaml.safe_load(out.read_text())
    assert written["rule"]["bmc"] == {"offset": 0, "vlan": 10} and written["rule"]["pxe"] == {"offset": 1, "vlan": 20}
    assert written["rule"]["roles"] == ["gpu"] and written["nics"] == {} and "switches" not in written
    site = load_site(site_file)
    back = load_design(out, site_positions(site), site.spec.switches)
    assert {h: (n.bmc.port, n.pxe.port) for h, n in back.nics.items() if n.bmc and n.pxe} == placed


def test_a_sheet_with_one_host_off_the_rule_stays_rows_unless_asked_then_keeps_that_host_explicit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.sites import copy_sim_site

    site_file = copy_sim_site(tmp_path / "site")
    sheet, placed = _rule_sheet(tmp_path / "nics.csv", site_file, moved="gpu-r1-02")
    out = tmp_path / "ethernet.yml"
    assert main(["ethernet", "import", str(sheet), "--site", str(site_file), "--out", str(out)]) == 0
    assert "rule" not in yaml.safe_load(out.read_text()) and len(yaml.safe_load(out.read_text())["nics"]) == len(placed)
    assert "rows kept: 1 row(s) not what the rule gives or carrying a MAC (e.g. gpu-r1-02)" in capsys.readouterr().out
    assert main(["ethernet", "import", str(sheet), "--site", str(site_file), "--rule", "always", "--out",
                 str(out)]) == 0
    written = yaml.safe_load(out.read_text())
    assert "rule" in written and list(written["nics"]) == ["gpu-r1-02"]
    assert written["nics"]["gpu-r1-02"]["pxe"]["port"] == placed["gpu-r1-02"][1]


def test_rows_that_put_two_hosts_on_one_port_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "base.yml").write_text(yaml.safe_dump(SWITCHES))
    sheet = tmp_path / "nics.csv"
    sheet.write_text("host,bmc switch,bmc port\ngpu-r1-01,tor-r1,Eth1/1\ngpu-r1-02,tor-r1,Ethernet1/1\n")
    assert main(["ethernet", "import", str(sheet), "--switches-from", str(tmp_path / "base.yml")]) == 1
    assert "tor-r1 eth1/1: two hosts on one port (gpu-r1-01 bmc, gpu-r1-02 bmc)" in capsys.readouterr().err
