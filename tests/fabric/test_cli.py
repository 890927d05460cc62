"""`fabric` command line: exit codes 0/1/2, --json, worklist and node-name-map files, one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fabric.cli import main
from fabric.design import Design, Port
from sim.asbuilt import AsBuilt
from tests.fabric.conftest import FIXTURES, SIM_DESIGN, realdata_text


def _capture(tmp_path: Path, ab: AsBuilt, name: str = "cap.txt") -> Path:
    path = tmp_path / name
    path.write_text(ab.render(only=ab.reachable("gpu-r1-01/mlx5_0")))
    return path


def test_clean_exits_0_and_prints_the_summary(sim_design: Design, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    cap = _capture(tmp_path, AsBuilt.from_design(sim_design))
    nnm = tmp_path / "node-name-map"
    assert main(["validate", "--design", str(SIM_DESIGN), "--discovered", str(cap), "--node-name-map", str(nnm)]) == 0
    out = capsys.readouterr().out
    assert "clean: cabled as designed" in out and "leaf-spine" in out
    assert nnm.read_text().count('"leaf-A-r3-') == 8


def test_findings_exit_2_with_json_and_worklist(sim_design: Design, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    ab = AsBuilt.from_design(sim_design)
    leaf = sim_design.switches()[0].name
    ab.swap(Port(leaf, 1), Port(leaf, 2))
    cap = _capture(tmp_path, ab)
    wl = tmp_path / "work.csv"
    code = main(["validate", "--design", str(SIM_DESIGN), "--discovered", str(cap), "--json", "--worklist", str(wl)])
    assert code == 2
    payload = json.loads(capsys.readouterr().out)
    assert [f["kind"] for f in payload["findings"]] == ["swapped"]
    assert payload["summary"]["total_findings"] == 1
    lines = wl.read_text().splitlines()
    assert lines[0].startswith("row,rack,u,device,port,kind,action") and len(lines) == 2


def test_real_ibsim_capture_against_the_sim_design(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", "--design", str(SIM_DESIGN), "--discovered",
                 str(FIXTURES / "ibsim-sim-site.iblinkinfo.txt"), "--json"])
    assert code == 2
    found = sorted(f["kind"] for f in json.loads(capsys.readouterr().out)["findings"])
    assert found == ["degraded", "port_down"]


@pytest.mark.realdata
def test_ufm_links_and_systems_against_the_sim_design(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", "--design", str(SIM_DESIGN), "--discovered", str(FIXTURES / "ufm-links.json"),
                 "--ufm-systems", str(FIXTURES / "ufm-systems.json"), "--json"])
    assert code == 2
    payload = json.loads(capsys.readouterr().out)
    kinds = {f["kind"] for f in payload["findings"]}
    # four links of a 289-link design: the rest is missing; the 1X uplink is degraded
    assert "degraded" in kinds and payload["summary"]["switches"]["placed"] == 3


@pytest.mark.realdata
def test_baseline_mode_without_a_site(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = realdata_text("ibnetdiscover__NVIDIA-topograph__tests_output_ibnetdiscover_example.out")
    good = tmp_path / "good.txt"
    good.write_text(text)
    assert main(["validate", "--baseline", str(good), "--discovered", str(good)]) == 0
    # today: one leaf port's cable moved to another free port of the same leaf
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("[1]\t\"H-e09d7303007a4bd8\""))
    lines[i] = lines[i].replace("[1]\t", "[60]\t", 1)
    j = next(k for k, ln in enumerate(lines) if ln.startswith("[1](e09d7303007a4bd8)"))
    lines[j] = lines[j].replace('"S-2c5eab0300b87b40"[1]', '"S-2c5eab0300b87b40"[60]')
    today = tmp_path / "today.txt"
    today.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["validate", "--baseline", str(good), "--discovered", str(today), "--json"]) == 2
    [f] = json.loads(capsys.readouterr().out)["findings"]
    assert f["kind"] == "miswired" and f["b"]["port"] == 60 and "A09-P1-IBLEAF-04-04[1]" in f["fix"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_bytes(b"\x7fELF\x00\x00garbage"), "binary data"),
        (lambda p: p.write_text(""), "empty input"),
        (lambda p: p.write_text("#\n# Topology file: x\n" + (FIXTURES / "ibsim-sim-site.ibnetdiscover.txt").read_text()
                                * 2), "two captures concatenated"),
    ],
)
def test_bad_captures_exit_1_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], make, message) -> None:  # type: ignore[no-untyped-def]
    cap = tmp_path / "cap.txt"
    make(cap)
    assert main(["validate", "--design", str(SIM_DESIGN), "--discovered", str(cap)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert "Traceback" not in err


@pytest.mark.realdata
def test_capture_of_another_fabric_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    other = tmp_path / "other.txt"
    other.write_text(realdata_text("ibnetdiscover__Mellanox-ufm_sdk_3.0__topo_small_topo_file.txt"))
    assert main(["validate", "--design", str(SIM_DESIGN), "--discovered", str(other)]) == 1
    assert "a capture of a different fabric" in capsys.readouterr().err


def test_bad_design_exits_1_naming_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "d.yml"
    bad.write_text('fabric: t\ndefaults: {width: 4X, speed: HDR}\nswitches:\n  - {"name": "s1", "ports": 4, "tier": 1}\nhosts: []\nlinks:\n'
                   '  - ["s1", 1, "s2", 1, "C1"]\n  - ["s1", 2, "s1", 3, "C2"]\n  - ["s1", 2, "s1", 4, "C3"]\n')
    assert main(["design", "check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "'s2' is not a declared switch" in err and "duplicate port s1[2]" in err and err.count("\n") == 1


def test_a_design_without_an_expected_rate_exits_1_naming_the_file_and_link(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: no `defaults` meant 4X HDR, so on an NDR fabric a link trained down to HDR passed.
    design = tmp_path / "ndr.yml"
    design.write_text("fabric: ndr\nswitches:\n  - {name: sw-ufm-ndr03, ports: 64, tier: 1}\n"
                      "  - {name: sw-ufm-ndr04, ports: 64, tier: 1}\nhosts: []\n"
                      "links:\n  - [sw-ufm-ndr03, 5, sw-ufm-ndr04, 5, C1]\n")
    assert main(["design", "check", str(design)]) == 1
    err = capsys.readouterr().err
    assert f"{design}: 2 problems" in err and "no expected width for link 1 (cable C1)" in err
    assert "no expected speed for link 1 (cable C1)" in err


def test_usage_errors_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--discovered", "x"]) == 1
    assert "exactly one of --site, --design or --baseline" in capsys.readouterr().err
    assert main(["validate", "--design", str(SIM_DESIGN)]) == 1


def test_live_without_an_hca_or_an_ib_diags_announcement_exits_1(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("BRINGUP_IB_DIAGS", raising=False)
    monkeypatch.setattr("fabric.live.SYS_IB", tmp_path / "none")
    assert main(["validate", "--design", str(SIM_DESIGN), "--live"]) == 1
    assert "no InfiniBand HCA on this host" in capsys.readouterr().err


def test_design_generate_and_check_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "d.yml"
    assert main(["design", "generate", "--hosts", "4", "--hcas", "2", "--radix", "8", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["cas"] == 8 and out.is_file()
    assert main(["design", "check", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_identify_reports_unplaced_switch(sim_design: Design, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from fabric.topology import NodeType

    ab = AsBuilt.from_design(sim_design)
    ab.add_node("extra", NodeType.SWITCH, 8, "Quantum Mellanox Technologies", 0xABC0)
    ab.plug(Port("extra", 1), Port(sim_design.switches()[0].name, 18))
    cap = _capture(tmp_path, ab)
    assert main(["identify", "--design", str(SIM_DESIGN), "--discovered", str(cap), "--json"]) == 2
    payload = json.loads(capsys.readouterr().out)
    assert len(payload["placed"]) == 141 and len(payload["unplaced"]) == 1
    assert "ports where the design expects no switch" in payload["unplaced"][0]["reason"]


def _site_with_design(tmp_path: Path) -> Path:
    import shutil

    site = tmp_path / "site.yml"
    text = (SIM_DESIGN.parent.parent / "site.yml").read_text()
    if "\nfabric:" not in text:
        text += "\nfabric:\n  design: fabric/design.yml\n"
    site.write_text(text)
    (tmp_path / "fabric").mkdir()
    shutil.copy(SIM_DESIGN, tmp_path / "fabric" / "design.yml")
    return site


def test_site_mode_uses_the_sites_design_and_host_locations(sim_design: Design, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    site = _site_with_design(tmp_path)
    ab = AsBuilt.from_design(sim_design)
    ab.degrade(Port(sim_design.switches()[1].name, 12), width="1X")  # gpu-r2-04/mlx5_1
    cap = _capture(tmp_path, ab)
    assert main(["validate", "--site", str(site), "--discovered", str(cap), "--json"]) == 2
    [f] = json.loads(capsys.readouterr().out)["findings"]
    assert f["kind"] == "degraded" and f["b"]["name"] == "gpu-r2-04/mlx5_1"
    assert f["b"]["location"] == {"row": "A", "rack": "r2", "u": 14}  # from the site's racks


def test_site_without_fabric_design_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site.yml"
    text = (SIM_DESIGN.parent.parent / "site.yml").read_text()
    site.write_text("\n".join(ln for ln in text.splitlines() if not ln.startswith("fabric:")
                              and not ln.startswith("  design:")) + "\n")
    assert main(["validate", "--site", str(site), "--discovered", str(FIXTURES / "ufm-links.json")]) == 1
    assert "no `fabric: {design: ...}`" in capsys.readouterr().err


def test_baseline_from_ibnetdiscover_checks_an_iblinkinfo_capture(capsys: pytest.CaptureFixture[str]) -> None:
    """Same fabric, two tools: CA GUIDs differ (node vs port GUID), HCAs are matched by description."""
    assert main(["validate", "--baseline", str(FIXTURES / "ibsim-sim-site.ibnetdiscover.txt"),
                 "--discovered", str(FIXTURES / "ibsim-sim-site.iblinkinfo-l.txt"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["cas"]["placed"] == 129 and summary["switches"]["placed"] == 12


def _without_rate(text: str, description: str) -> str:
    """The capture with the rate cut from both port lines of the HCA `description`'s link."""
    lines = text.splitlines()
    ca = next(i for i, ln in enumerate(lines) if ln.startswith("Ca") and ln.endswith(f'# "{description}"'))
    sw = next(i for i, ln in enumerate(lines) if f'# "{description}" lid' in ln)
    for i in (ca + 1, sw):
        assert lines[i].endswith(" 4xHDR")
        lines[i] = lines[i].removesuffix(" 4xHDR")
    return "\n".join(lines) + "\n"


def test_port_lines_without_their_rate_are_rate_unknown_not_clean(sim_design: Design, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    ab = AsBuilt.from_design(sim_design)
    cap = tmp_path / "cap.txt"
    cap.write_text(_without_rate(ab.render(only=ab.reachable("gpu-r1-01/mlx5_0")), "gpu-r1-03 mlx5_0"))
    wl = tmp_path / "work.csv"
    assert main(["validate", "--design", str(SIM_DESIGN), "--discovered", str(cap), "--json",
                 "--worklist", str(wl)]) == 2
    payload = json.loads(capsys.readouterr().out)
    [f] = payload["findings"]
    assert f["kind"] == "rate_unknown" and f["b"]["name"] == "gpu-r1-03/mlx5_0" and f["unread"] == ["width", "speed"]
    assert f["expected"] == "4X HDR" and "validate again" in f["fix"]
    summary = payload["summary"]
    assert summary["clean"] is False and summary["findings"]["rate_unknown"] == 1
    assert summary["warning_count"] == 2  # the parser said so too: "link kept without its rate"
    assert [r.split(",")[5] for r in wl.read_text().splitlines()[1:]] == ["rate_unknown"]
    assert main(["validate", "--design", str(SIM_DESIGN), "--discovered", str(cap)]) == 2
    assert "1 finding(s)" in capsys.readouterr().out


def test_ufm_links_with_a_width_and_no_speed_are_rate_unknown(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    entries = json.loads((FIXTURES / "ufm-links.json").read_text())
    del entries[0]["speed"]  # as UFM's documented links example: "width": "4x" and nothing else
    links = tmp_path / "links.json"
    links.write_text(json.dumps(entries))
    assert main(["validate", "--design", str(SIM_DESIGN), "--discovered", str(links),
                 "--ufm-systems", str(FIXTURES / "ufm-systems.json"), "--json"]) == 2
    found = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["kind"] == "rate_unknown"]
    assert [(f["a"]["name"], f["b"]["name"], f["unread"]) for f in found] == [
        ("leaf-A-r3-U40", "gpu-r1-01/mlx5_0", ["speed"])]


def test_design_import_csv_without_speed_exits_1_with_one_line_not_an_hdr_design(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cabling = tmp_path / "cabling.csv"
    cabling.write_text("Cable ID,Source Device,Source Port,Destination Device,Destination Port\n"
                       "C1,leaf-A-03-U40,1,gpu-01-01 mlx5_0,1\n")
    out = tmp_path / "design.yml"
    assert main(["design", "import-csv", str(cabling), "--width", "4X", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no expected speed for row 2: give --speed (e.g. --speed NDR)" in err
    assert not out.exists()
    assert main(["design", "import-csv", str(cabling), "--width", "4X", "--speed", "NDR", "--out", str(out)]) == 0
    assert "defaults: {width: 4X, speed: NDR}" in out.read_text()


def _ufm_links(tmp_path: Path, name: str, without_speed: range) -> Path:
    entries = json.loads((FIXTURES / "ufm-links.json").read_text())
    for i in without_speed:
        del entries[i]["speed"]
    path = tmp_path / name
    path.write_text(json.dumps(entries))
    return path


def test_a_baseline_whose_capture_has_no_speeds_does_not_pass_links_at_an_assumed_hdr(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # An NDR fabric captured by UFM without speeds; today every link trained at HDR.
    base = _ufm_links(tmp_path, "base.json", range(4))
    today = _ufm_links(tmp_path, "today.json", range(0))
    assert main(["validate", "--baseline", str(base), "--discovered", str(today), "--json"]) == 2
    payload = json.loads(capsys.readouterr().out)
    assert payload["summary"]["clean"] is False
    assert sorted((f["kind"], f["expected"], f["unread"], f["expected_unknown"]) for f in payload["findings"]) == [
        ("rate_unknown", "1X ?", [], ["speed"])] + [("rate_unknown", "4X ?", [], ["speed"])] * 3
    assert all("baseline base.json gives no expected speed" in f["seen"] for f in payload["findings"])


def test_a_baseline_link_without_its_speed_is_rate_unknown_not_the_fabrics_usual_speed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _ufm_links(tmp_path, "base.json", range(1))  # the other three links say HDR
    today = _ufm_links(tmp_path, "today.json", range(0))
    assert main(["validate", "--baseline", str(base), "--discovered", str(today), "--json"]) == 2
    [f] = json.loads(capsys.readouterr().out)["findings"]
    assert (f["kind"], f["a"]["name"], f["b"]["name"], f["expected"]) == (
        "rate_unknown", "leaf-A-r3-U40", "gpu-r1-01/mlx5_0", "4X ?")


@pytest.mark.realdata
def test_the_vendor_ufm_links_example_is_not_clean_against_an_ndr_design(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    text = realdata_text("../3_ufm/ufm-rest-links__docs.nvidia.com-ufmenterpriserestapiv6200-links-rest-api_"
                         "NDR-sw-ufm-ndr03.json")
    links = tmp_path / "links.json"
    links.write_text(re.sub(r",\s*\]\s*$", "]", text))  # the page's trailing comma
    design = tmp_path / "d.yml"
    design.write_text("fabric: ndr\ndefaults: {width: 4X, speed: NDR}\nswitches:\n"
                      "  - {name: sw-ufm-ndr03, ports: 64, tier: 1}\n  - {name: sw-ufm-ndr04, ports: 64, tier: 1}\n"
                      "hosts: []\nlinks:\n  - [sw-ufm-ndr03, 5, sw-ufm-ndr04, 5, C1]\n")
    assert main(["validate", "--design", str(design), "--discovered", str(links), "--json"]) == 2
    payload = json.loads(capsys.readouterr().out)
    assert [f["kind"] for f in payload["findings"]] == ["rate_unknown"] and payload["summary"]["clean"] is False
