"""A management switch whose LLDP neighbour names echo credentials leaves no copy of one in
`ethernet-check.json` or in `report.html` (issue 38): not its own login password, which `provision ethernet
check` resolves, nor the BMC password the site names and neither command resolves. An
`ethernet-check.json` already holding one (written before this masking) is shown masked in the report.

The switch stand-in is sim/switches (NX-OS prompts and tables as ntc-templates' captures show them); the
echo is in the system name of the LLDP neighbour on each PXE port it reports. The passwords hold `&`, `'`
and `<`: the report is HTML, where they travel escaped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from provision.cli import main
from provision.state import secret_values
from sim.switches.asbuilt import EthernetFaults
from sim.switches.harness import running
from tests.ethernet.conftest import lab
from tests.sites import copy_sim_site

SWITCH_PASSWORD = "sw-Echo&'<Pass-51"
BMC_PASSWORD = "Bmc&never'resolved<93"


def _leaks(where: str, text: str) -> list[str]:
    import html

    forms = {"switch password": SWITCH_PASSWORD, "bmc password": BMC_PASSWORD}
    found = []
    for name, value in forms.items():
        for shown in {value, html.escape(value), value.replace("&", "&amp;").replace("'", "&#39;").replace("<", "&lt;"),
                      json.dumps(value)[1:-1]}:
            if shown in text:
                found.append(f"{where}: {name} as {shown!r}")
    return found


def test_credentials_echoed_in_lldp_names_reach_neither_the_check_file_nor_the_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    design, asbuilt = lab(1, 3, EthernetFaults(), platforms=("cisco_nxos",))
    echoed = 0
    for port in asbuilt["switches"][0]["ports"]:
        for neighbour in port["lldp"]:
            neighbour[0] = f"{neighbour[0]}.login:admin/{SWITCH_PASSWORD}.bmc:root/{BMC_PASSWORD}"
            echoed += 1
    assert echoed == 3
    site = copy_sim_site(tmp_path / "site")
    data = yaml.safe_load(site.read_text())
    data["credentials"]["switch_admin"] = {"username": "admin", "password": {"env": "TEST_SWITCH_PASSWORD"}}
    data["switches"] = {n: s.model_dump() for n, s in design.switches.items()}
    site.write_text(yaml.safe_dump(data))
    (site.parent / "ethernet.yml").write_text(yaml.safe_dump(
        {"nics": {h: n.model_dump(exclude_none=True) for h, n in design.nics.items()}}))
    monkeypatch.setenv("TEST_SWITCH_PASSWORD", SWITCH_PASSWORD)
    monkeypatch.setenv("BRINGUP_SIM_BMC_PASSWORD", BMC_PASSWORD)
    for name in ("BRINGUP_STATE_DB", "BRINGUP_SITE"):
        monkeypatch.delenv(name, raising=False)
    run = tmp_path / "run"
    run.mkdir()
    checked = run / "ethernet-check.json"
    with running(asbuilt, SWITCH_PASSWORD):
        main(["ethernet", "check", "--site", str(site), "--timeout", "3", "--json", "--out", str(checked)])
    text = checked.read_text()
    assert "login:admin/********" in text, "the LLDP names were read and are in the file"
    assert _leaks("ethernet-check.json", text) == []

    secret_values.forget_all()  # a later command, in a process that resolved nothing
    assert main(["report", "--site", str(site), "--run-dir", str(run), "--out", str(run / "report.html")]) == 0
    page = (run / "report.html").read_text()
    assert "login:admin/********" in page
    assert _leaks("report.html", page) == []

    # a file written before this masking: the report masks what it holds
    doc = json.loads(text)
    doc["findings"] = [{"host": "gpu-r1-01", "reason": f"echoed {SWITCH_PASSWORD} and {BMC_PASSWORD}"}]
    checked.write_text(json.dumps(doc))
    secret_values.forget_all()
    assert main(["report", "--site", str(site), "--run-dir", str(run), "--out", str(run / "report.html")]) == 0
    page = (run / "report.html").read_text()
    assert "echoed ******** and ********" in page
    assert _leaks("report.html", page) == []
