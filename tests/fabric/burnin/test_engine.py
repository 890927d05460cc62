"""Which routing engine programmed the tables, from opensm's own log (the real OpenSM 3.3.23's, see
tests/fixtures/fabric/burnin/SOURCES.md), and the plan's warning when ftree fell back to minhop."""

from __future__ import annotations

import json

from fabric.burnin.engine import parse_opensm_log
from fabric.cli import main as fabric_main
from tests.cli_run import run_cli
from tests.fabric.burnin.helpers import BURNIN, text


def test_an_ftree_request_that_fell_back_is_minhop_with_opensms_reason() -> None:
    engine = parse_opensm_log(text("selene.opensm-ftree-fallback.log"), "opensm.log")
    assert (engine.used, engine.failed, engine.fell_back) == ("minhop", ("ftree",), True)
    assert any("not a fat-tree" in w for w in engine.why)
    warning = engine.warning()
    assert warning is not None and "fell back to minhop" in warning and "ftree" in warning


def test_updn_that_routed_the_fabric_is_no_warning_and_discoverys_complaints_are_not_its_reason() -> None:
    engine = parse_opensm_log(text("selene.opensm-updn.log"))
    assert (engine.used, engine.failed, engine.fell_back, engine.why) == ("updn", (), False, ())
    assert engine.warning() is None


def test_a_log_that_never_says_is_unknown_and_said_so() -> None:
    engine = parse_opensm_log("Dec 06 06:32:37 349295 [F6F68740] 0x80 -> OpenSM 3.3.23\n")
    assert engine.used is None and "does not say" in (engine.warning() or "")


def test_the_last_routing_pass_counts() -> None:
    log = text("selene.opensm-ftree-fallback.log")
    later = log + "Dec 06 07:00:00 000001 [F3F616C0] 0x02 -> osm_ucast_mgr_process: ftree tables configured on all switches\n"
    assert parse_opensm_log(later).used == "ftree"


def test_cli_plan_names_the_engine_and_warns_of_the_fallback() -> None:
    log = BURNIN / "selene.opensm-ftree-fallback.log"
    result = run_cli(fabric_main, [
        "burnin", "plan", "--discovered", str(BURNIN / "sim-site.ibnetdiscover.txt"), "--routing",
        str(BURNIN / "sim-site.ftree.dump_lfts.txt"), "--hosts", "gpu-*", "--opensm-log", str(log), "--json"])
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["routing_engine"]["used"] == "minhop" and doc["routing_engine"]["fell_back"] is True
    assert "fell back to minhop" in doc["warnings"][0]
    result = run_cli(fabric_main, [
        "burnin", "plan", "--discovered", str(BURNIN / "sim-site.ibnetdiscover.txt"), "--routing",
        str(BURNIN / "sim-site.ftree.dump_lfts.txt"), "--opensm-log", str(log)])
    assert "routing engine: minhop (fell back from ftree)" in result.stdout
