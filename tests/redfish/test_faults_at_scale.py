"""512 simulated BMCs, 10% faulty: the healthy ones are harvested, each faulty one fails with the right
reason, and after the repair a second run finishes exactly the rest without touching anything else."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from provision.bmc import HarvestStep, RunOptions
from provision.redfish import ClientOptions
from provision.site import load_site
from provision.state import State, StateStore
from tests.redfish.simlab import PASSWORD_VAR, SimProcess, free_port, new_password, write_site

EXPECTED = {
    "wrong_password": "bmc_auth",
    "http_503": "bmc_error_5xx",
    "hang": "bmc_timeout",
    "tls_error": "bmc_tls",
    "unreachable": "bmc_unreachable",
    "no_pxe_nic": "no_pxe_nic",
    "pxe_link_down": "pxe_nic_link_down",
    "missing_gpu": "unexpected_hardware",
}
HOSTS = 512


def test_512_bmcs_with_10_percent_faulty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    password = new_password()
    monkeypatch.setenv(PASSWORD_VAR, password)
    site_path = write_site(tmp_path, HOSTS, free_port())
    site = load_site(site_path)
    names = [h.hostname for h in site.hosts()]
    kinds = list(EXPECTED)
    # 48 broken hosts spread over the site (8 kinds x 6), plus 3 slow-but-healthy ones: 51 = 10%.
    faulty = {names[7 + i * 10]: kinds[i % len(kinds)] for i in range(48)}
    slow = [names[5], names[255], names[505]]
    faults_file = tmp_path / "faults.yml"
    faults_file.write_text(yaml.safe_dump({"faults": {**{h: [k] for h, k in faulty.items()},
                                                      **{h: ["slow"] for h in slow}}}))
    store = StateStore(tmp_path / "state.db")
    store.sync_site((h.hostname, h.rack) for h in site.hosts())
    # 12 s per request: on 2 loaded cores one request of 256 in flight can wait seconds for the event
    # loop, and a healthy host must never be taken for a hung one (the hung ones still fail at 12 s).
    options = RunOptions(concurrency=256, host_timeout_s=60,
                         client=ClientOptions(timeout_s=12.0, retries=1, backoff_s=0.05, backoff_max_s=0.1))

    with SimProcess(site_path, password, tmp_path / "run", slow_ms=200, faults=faults_file) as sim:
        first = asyncio.run(HarvestStep(site, store, options).run(site.hosts()))
        by_host = {r.host: r for r in first}
        for host in names:
            rec = store.get(host)
            if host in faulty:
                assert rec.state is State.failed, host
                assert rec.reason == EXPECTED[faulty[host]], (host, faulty[host], by_host[host].detail)
                assert rec.evidence and rec.evidence.get("bmc", "").startswith("https://"), host
            else:
                assert rec.state is State.macs_harvested, (host, by_host[host].reason, by_host[host].detail)
        healthy = [h for h in names if h not in faulty]
        events_before = {h: len(store.history(h)) for h in healthy}
        requests_before = {h: s["requests"] for h, s in sim.hosts().items()}
        assert all(s["sessions"] == 0 for s in sim.hosts().values())

        sim.repair()
        second = asyncio.run(HarvestStep(site, store, options).run(site.hosts()))
        done = sorted(r.host for r in second if r.ok and not r.skipped)
        assert done == sorted(faulty)
        assert all(store.get(h).state is State.macs_harvested for h in names)
        assert {h: len(store.history(h)) for h in healthy} == events_before
        after = sim.hosts()
        assert all(after[h]["requests"] == requests_before[h] for h in healthy), "a healthy BMC was asked again"
        # failed → bmc_reachable → macs_harvested: the repaired hosts resumed the flow, history kept.
        repaired = store.history(next(iter(faulty)))
        assert [e.to_state for e in repaired][-3:] == [State.failed, State.bmc_reachable, State.macs_harvested]
