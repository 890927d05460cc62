"""`fabric ports plan` with no site, through the program's own entry point (tests/cli_run.py), on real and ibsim
captures."""

from __future__ import annotations

import json
from pathlib import Path

from fabric.cli import main as fabric_main
from tests.cli_run import run_cli
from tests.fabric.ports.helpers import FIXTURES, IBSIM, LEAF, SPINE

NDR = FIXTURES / "ibnetdiscover__NVIDIA-topograph__tests_output_ibnetdiscover_example.out"
NOW = ["--now", "2026-12-01T19:00:00Z"]


def _plan(*args: str) -> dict[str, object]:
    result = run_cli(fabric_main, ["ports", "plan", *args, "--json"])
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_json_names_both_ends_by_guid_and_port_with_action_and_evidence() -> None:
    out = _plan("--discovered", str(IBSIM / "ibnetdiscover.txt"), "--events", str(IBSIM / "event.log"),
                "--counters", str(IBSIM / "perfquery-before.txt"), "--counters", str(IBSIM / "perfquery-after.txt"),
                *NOW)
    links = {(link["a"]["guid"], link["a"]["port"]): link for link in out["links"]}  # type: ignore[attr-defined]
    up = links[(f"0x{LEAF}", 25)]
    assert (up["b"]["guid"], up["b"]["port"], up["action"]) == (f"0x{SPINE}", 2, "disable")
    assert up["evidence"][0]["code"] == 329 and up["evidence"][0]["time"].startswith("2026-12-01T08:15:02")
    assert links[(f"0x{LEAF}", 8)]["action"] == "watch"
    assert out["needs_force"] is False and out["bursts"][0]["events"] == 60  # type: ignore[index]


def test_imbue_style_events_on_a_real_ndr_fabric_resolve_by_switch_name_and_port_label(tmp_path: Path) -> None:
    log = tmp_path / "event.log"
    log.write_text(
        "2026-12-01 10:02:44.900 [77] [702] WARNING [Fabric_Notification] IBPort "
        "[default / Switch: A09-P1-IBLEAF-04-04 / 1/18/1]: Peer Port A10-P1-IBSPINE-02:1/16/2 is considered by "
        "SM as unhealthy due to FLAPPING.\n"
        "2026-12-01 10:05:00.000 [78] [329] WARNING [Fabric_Topology] Link [x]: Link went down: "
        "(Switch:A09-P1-IBLEAF-04-04:1/18/2)2c5eab0300b87b40:36 - (Switch:A10-P1-IBSPINE-02:1/16/1)"
        "2c5eab0300c26280:31, cable S/N: MT2330FT09118\n")
    out = _plan("--discovered", str(NDR), "--events", str(log), *NOW)
    got = {(link["a"]["name"], link["a"]["port"], link["b"]["name"], link["b"]["port"], link["cable_serial"])
           for link in out["links"]}  # type: ignore[attr-defined]
    assert got == {("A09-P1-IBLEAF-04-04", 35, "A10-P1-IBSPINE-02", 32, None),
                   ("A09-P1-IBLEAF-04-04", 36, "A10-P1-IBSPINE-02", 31, "MT2330FT09118")}


def test_text_output_says_what_it_would_do_and_what_it_set_apart() -> None:
    result = run_cli(fabric_main, ["ports", "plan", "--discovered", str(IBSIM / "ibnetdiscover.txt"),
                                   "--events", str(IBSIM / "event.log"), "--since", "24h", *NOW])
    assert result.code == 0, result.stderr
    assert "4 link(s) to disable, 1 to watch" in result.stdout  # no counters: the host link-down is watched
    assert "burst (UFM restart or mass reboot, not counted): 60 events" in result.stdout
    assert "set apart:" in result.stdout and "1234 (1x)" in result.stdout


def test_errors_are_one_readable_line_and_exit_1(tmp_path: Path) -> None:
    cases = [["--discovered", str(tmp_path / "missing.txt")],
             ["--discovered", str(IBSIM / "ibnetdiscover.txt"), "--since", "yesterday"],
             ["--discovered", str(IBSIM / "ibnetdiscover.txt"), "--now", "soon"],
             ["--discovered", str(IBSIM / "ibnetdiscover.txt"), "--events-tz", "Mars/Olympus"]]
    bad_json = tmp_path / "events.json"
    bad_json.write_text("[{\"event_type\": 329,")
    cases.append(["--discovered", str(IBSIM / "ibnetdiscover.txt"), "--events", str(bad_json)])
    for args in cases:
        result = run_cli(fabric_main, ["ports", "plan", *args])
        assert result.code == 1, (args, result.stdout, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, result.stderr)


def test_a_burn_in_judgements_failing_links_become_links_to_disable(tmp_path: Path) -> None:
    judged = {"port_plan_evidence": [{
        "time": "2026-12-01T18:30:00+00:00", "source": "burnin", "kind": "degraded",
        "at": {"guid": "0xb8599f0300000070", "port": 1}, "code": None, "condemns": True,
        "text": "burn-in: gpu-r1-01/mlx5_7 -> leaf: 171.2 Gb/s, below the 180 Gb/s floor"}]}
    judge = tmp_path / "judge.json"
    judge.write_text(json.dumps(judged))
    out = _plan("--discovered", str(IBSIM / "ibnetdiscover.txt"), "--burnin", str(judge), *NOW)
    [link] = [x for x in out["links"] if "0xb8599f0300000070" in (x["a"]["guid"], x["b"]["guid"])]  # type: ignore[attr-defined]
    assert link["action"] == "disable"
    assert [e["source"] for e in link["evidence"]] == ["burnin"]
    judge.write_text(json.dumps({"port_plan_evidence": [{"at": {"guid": "zz", "port": 1}}]}))
    result = run_cli(fabric_main, ["ports", "plan", "--discovered", str(IBSIM / "ibnetdiscover.txt"),
                                   "--burnin", str(judge), *NOW])
    assert result.code == 1 and "not a piece of port evidence" in result.stderr
