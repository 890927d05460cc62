"""The routing engine of tables read live, without opensm's log: UFM's SM configuration says it.

Shapes from NVIDIA's UFM Enterprise REST API Guide, "SM Configuration REST API" (v6.16-v6.22): `GET
/ufmRest/app/smconf` answers one object of opensm.conf's keys with `routing_engine_active` (`"minhop"` in its
example), `?param_name=<key>` that key alone, 400 for a bad request. `routing_engine` is opensm.conf's own key
(opensm(8): engines tried in turn, comma separated). The lab's UFM simulator is the SM of its ibsim fabric:
here it asks the real OpenSM for torus-2QoS, which cannot route a fat tree ("torus-2QoS: cannot build fwd
tables"), so OpenSM falls back to minhop, and the plan read live must say so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fabric.burnin.engine import engine_from_sm_config
from fabric.cli import main as fabric_main
from fabric.ufm.errors import UfmProtocolError
from fabric.ufm.smconf import parse_sm_config
from tests.fabric.ufmsim import SITE_UFM_URL, UfmSite, ufm_site
from tests.sites import copy_sim_site

PASSWORD = "Ufm-smconf-sim"
# the guide's example answer, cut to a few keys, with opensm.conf's routing_engine asking for ftree
GUIDE = ('{"m_key": "0x0", "sm_priority": 15, "log_file": "\\/opt\\/ufm\\/files\\/log\\/opensm.log", '
         '"routing_engine_active": "minhop", "lfts_file": "\\/opt\\/ufm\\/files\\/conf\\/opensm\\/lfts.conf", '
         '"routing_engine": "ftree"}')


def test_an_ftree_request_with_minhop_active_is_a_fallback() -> None:
    engine = engine_from_sm_config(parse_sm_config(GUIDE), "UFM")
    assert (engine.used, engine.failed, engine.fell_back) == ("minhop", ("ftree",), True)
    assert "fell back to minhop" in (engine.warning() or "")


def test_the_active_engine_from_the_list_asked_for_is_no_fallback_of_those_after_it() -> None:
    engine = engine_from_sm_config(parse_sm_config(
        '{"routing_engine": "ftree,updn", "routing_engine_active": "ftree"}'), "UFM")
    assert (engine.used, engine.failed, engine.warning()) == ("ftree", (), None)
    engine = engine_from_sm_config(parse_sm_config(
        '{"routing_engine": "ftree,updn", "routing_engine_active": "updn"}'), "UFM")
    assert engine.failed == ("ftree",) and engine.fell_back


def test_no_active_engine_is_unknown_and_said() -> None:
    engine = engine_from_sm_config(parse_sm_config('{"routing_engine": "ftree"}'), "UFM")
    warning = engine.warning() or ""
    assert engine.used is None and "does not say" in warning and "names no routing_engine_active" in warning


@pytest.mark.parametrize("answer", ['[{"routing_engine_active": "minhop"}]', '{"routing_engine_active": 3}',
                                    '{"routing_engine_active": "min hop"}', "<html>", '{"routing_engine_active":'
                                    ' "ftree,updn"}'])
def test_an_answer_that_is_not_the_sm_configuration_is_a_protocol_error(answer: str) -> None:
    with pytest.raises(UfmProtocolError):
        parse_sm_config(answer)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UfmSite]:
    # faults="": none of the demo's flaps and rising errors (nothing here reads them)
    with ufm_site(tmp_path_factory.mktemp("smconf"), PASSWORD, poll_s=60, faults="",
                  routing_engine="torus-2QoS") as ufm:
        yield ufm


@pytest.mark.tools("ibsim", "opensm")
def test_the_simulated_ufm_serves_what_its_opensm_did(lab: UfmSite) -> None:
    url = f"{lab.url}/ufmRest/app/smconf"
    with httpx.Client(verify=False, auth=("admin", PASSWORD), timeout=10) as http:
        whole = http.get(url).json()
        one = http.get(url, params={"param_name": "routing_engine_active"})
        bad = http.get(url, params={"param_name": "no_such_key"})
    assert (whole["routing_engine"], whole["routing_engine_active"]) == ("torus-2QoS", "minhop")
    assert one.json() == {"routing_engine_active": "minhop"} and bad.status_code == 400


@pytest.mark.tools("ibsim", "opensm")
def test_a_plan_read_live_names_ufms_engine_and_warns_of_the_fallback(
        lab: UfmSite, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRINGUP_SIM_UFM_PASSWORD", PASSWORD)
    monkeypatch.setenv("BRINGUP_IB_DIAGS", str(lab.state))
    capsys.readouterr()
    code = fabric_main(["burnin", "plan", "--site", str(lab.site), "--db", str(tmp_path / "state.db"), "--all-hosts",
                        "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["routing_engine"]["used"] == "minhop" and doc["routing_engine"]["failed"] == ["torus-2QoS"]
    assert "/ufmRest/app/smconf" in doc["routing_engine"]["source"]
    assert any("fell back to minhop" in w for w in doc["warnings"])


def test_an_unreachable_ufm_leaves_the_engine_unknown_and_says_why(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from fabric.burnin.site_plan import ufm_engine
    from provision.site import load_site

    site_file = copy_sim_site(tmp_path / "sim")
    site_file.write_text(site_file.read_text().replace(SITE_UFM_URL, "https://127.0.2.206:9/"))
    monkeypatch.setenv("BRINGUP_SIM_UFM_PASSWORD", PASSWORD)
    engine = ufm_engine(load_site(site_file))
    assert engine is not None and engine.used is None
    assert "not read" in (engine.warning() or "") and "cannot reach UFM" in (engine.warning() or "")
