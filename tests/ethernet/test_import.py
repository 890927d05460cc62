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
                 "pxe_switch=Data SW,pxe_port=Data Port"]) == 2
    err = capsys.readouterr().err
    assert "sheet 'OOB' row 3: BMC switch 'tor-r9' is not declared" in err
    assert "sheet 'OOB' row 5: PXE MAC 'zz' is not a MAC address" in err
