"""`provision health` against simulated SSH hosts that run the real agent on replayed captures.

One run over 32 hosts covers every fault: broken endpoints (refused, hung handshake, dropped,
wrong host key, hung command), mangled reports, broken tools, faulty hardware captures and a slow host.
Each faulty host ends unknown/unhealthy/critical with its reason; none is healthy; the run finishes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from provision.cli import main as provision_main
from provision.health.run import run_health
from provision.health.verdict import Verdict
from provision.ssh import SshSettings
from provision.state import State
from tests.health.conftest import needs_replay

pytestmark = needs_replay

FAULTS: dict[str, dict[str, Any]] = {
    "gpu-0002": {"fixture": "h200x2-xid79"},
    "gpu-0003": {"fixture": "h200x2-pcie-x4"},
    "gpu-0004": {"fixture": "h200x2-ecc-uncorrected"},
    "gpu-0005": {"fixture": "h200x2-ib-port-down"},
    "gpu-0006": {"endpoint": "refuse"},
    "gpu-0007": {"endpoint": "hang_handshake"},
    "gpu-0008": {"endpoint": "wrong_host_key"},
    "gpu-0009": {"endpoint": "hang"},
    "gpu-0010": {"endpoint": "drop"},
    "gpu-0011": {"agent_output": "garbled"},
    "gpu-0012": {"agent_output": "truncated"},
    "gpu-0013": {"agent_output": "empty"},
    "gpu-0014": {"tools": {"nvidia-smi-q": "truncate"}},
    "gpu-0015": {"tools": {"nvidia-smi-q": "empty"}},
    "gpu-0016": {"tools": {"nvidia-smi-q": "garble", "dmesg": "garble"}},
    "gpu-0017": {"tools": {"nvidia-smi-q": "missing"}},
    "gpu-0018": {"tools": {"nvidia-smi-q": "hang"}},
    "gpu-0019": {"delay_s": 1.0},
    "gpu-0020": {"agent_output": "flood"},
}

EXPECTED: dict[str, tuple[Verdict, str]] = {
    "gpu-0006": (Verdict.unknown, "ssh_refused"),
    "gpu-0007": (Verdict.unknown, "ssh_connect_timeout"),
    "gpu-0008": (Verdict.unknown, "ssh_host_key_mismatch"),
    "gpu-0009": (Verdict.unknown, "health_timeout"),
    "gpu-0010": (Verdict.unknown, "ssh_disconnected"),
    "gpu-0011": (Verdict.unknown, "agent_output_garbled"),
    "gpu-0012": (Verdict.unknown, "agent_output_garbled"),
    "gpu-0013": (Verdict.unknown, "agent_no_output"),
    "gpu-0017": (Verdict.unknown, "tool_missing"),
    "gpu-0018": (Verdict.unknown, "timeout"),
    # Cut at the output limit and stopped, well before the 4 s timeout (not `health_timeout`).
    "gpu-0020": (Verdict.unknown, "agent_output_too_large"),
}


def test_every_fault_gets_its_verdict_and_reason_and_the_rest_are_healthy(sim_site_factory: Any) -> None:
    sim = sim_site_factory(32, FAULTS)
    report = run_health(sim.site, sim.store, timeout_s=4.0, concurrency=16,
                        settings=SshSettings.from_site(sim.site, sim.env))
    by_host = {r.host: r for r in report.results}
    assert len(by_host) == 32
    healthy = {h for h, r in by_host.items() if r.verdict is Verdict.healthy}
    assert healthy == {"gpu-0001", "gpu-0019"} | {f"gpu-{i:04d}" for i in range(21, 33)}
    for host, (verdict, reason) in EXPECTED.items():
        assert (by_host[host].verdict, by_host[host].reason) == (verdict, reason), host
    assert by_host["gpu-0002"].verdict is Verdict.critical and "xid" in (by_host["gpu-0002"].reason or "")
    assert by_host["gpu-0005"].verdict is Verdict.critical and by_host["gpu-0005"].reason == "ib_port_down"
    assert (by_host["gpu-0003"].verdict, by_host["gpu-0003"].reason) == (Verdict.critical, "pcie_width_x4")
    assert (by_host["gpu-0004"].verdict, by_host["gpu-0004"].reason) == (Verdict.critical, "ecc_uncorrected")
    for host in ("gpu-0014", "gpu-0015", "gpu-0016"):  # a broken tool's output: the agent could not tell
        assert by_host[host].verdict is Verdict.unknown, host
        assert by_host[host].reason in ("truncated_output", "unparseable_output"), host

    # Recorded: healthy hosts went golden (the site does not require burn-in), the others failed with reasons.
    assert sorted(sim.store.in_state(State.golden)) == sorted(healthy)
    failed = {h: sim.store.get(h) for h in by_host if h not in healthy}
    assert all(rec.state is State.failed for rec in failed.values())
    assert failed["gpu-0006"].reason == "ssh_refused"
    assert failed["gpu-0002"].evidence["report"]["checks"], "the agent's report is the evidence"


def test_the_cli_prints_the_summary_as_json_and_exits_2_when_a_host_is_not_healthy(
    sim_site_factory: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = sim_site_factory(6, {"gpu-0002": {"fixture": "h200x2-xid79"}, "gpu-0003": {"endpoint": "refuse"}},
                           state=State.deployed)
    for name, value in sim.env.items():
        monkeypatch.setenv(name, value)
    site = str(sim.directory / "site.yml")
    db = str(sim.store.path)
    sim.store.mark("gpu-0001", State.configured, reason="test")
    sim.store.mark("gpu-0002", State.configured, reason="test")
    sim.store.mark("gpu-0003", State.configured, reason="test")
    code = provision_main(["health", "--site", site, "--db", db, "--json", "--timeout", "5"])
    payload = json.loads(capsys.readouterr().out)
    assert code == 2
    assert payload["by_verdict"] == {"healthy": 1, "unhealthy": 0, "critical": 1, "unknown": 1}
    assert payload["top_reasons"]["unknown"] == [["ssh_refused", 1]]
    assert sorted(payload["skipped"]) == ["gpu-0004", "gpu-0005", "gpu-0006"], "not configured yet"
    assert payload["promoted_to_golden"] == ["gpu-0001"]

    code = provision_main(["golden", "--site", site, "--db", db, "--format", "deepspeed"])
    assert code == 0
    assert capsys.readouterr().out == "gpu-0001 slots=2\n"

    # --no-record checks hosts in any state and writes nothing.
    code = provision_main(["health", "--site", site, "--db", db, "--json", "--no-record", "--hosts", "gpu-000[4-6]"])
    payload = json.loads(capsys.readouterr().out)
    assert code == 0 and payload["by_verdict"]["healthy"] == 3 and not payload["recorded"]
    assert sim.store.get("gpu-0004").state is State.deployed


def test_the_long_level_runs_fast_and_long_checks_so_a_fast_fault_still_fails(sim_site_factory: Any) -> None:
    sim = sim_site_factory(2, {"gpu-0002": {"fixture": "h200x2-xid79"}}, state=State.healthy)
    report = run_health(sim.site, sim.store, level="long", timeout_s=20.0,
                        settings=SshSettings.from_site(sim.site, sim.env))
    by_host = {r.host: r for r in report.results}
    good = by_host["gpu-0001"]
    assert good.verdict is Verdict.healthy
    checks = {c["check"] for c in good.evidence["report"]["checks"]}
    assert {"gpu_stress", "gpu_memory_bandwidth", "gpu_xid"} <= checks
    assert (by_host["gpu-0002"].verdict, by_host["gpu-0002"].reason) == (Verdict.critical, "xid_79")
    assert sim.store.history("gpu-0002")[-1].command == "health long"
