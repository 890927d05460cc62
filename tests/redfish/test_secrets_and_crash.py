"""Credentials never leak (argv, output, state, exports, logs, errors), and `kill -9` mid-run loses
nothing that was recorded: the re-run finishes the rest and redoes nothing."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from provision.bmc import HarvestStep, RunOptions
from provision.errors import CredentialError
from provision.redfish import ClientOptions
from provision.site import load_site
from provision.state import State, StateStore
from tests.redfish.simlab import PASSWORD_VAR, REPO, SimProcess, free_port, new_password, write_site


def _cmdlines() -> list[bytes]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out.append((entry / "cmdline").read_bytes())
            except OSError:
                continue
    return out


def test_credentials_appear_nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    caplog: pytest.LogCaptureFixture) -> None:
    password = new_password()
    secrets = [password.encode(), base64.b64encode(f"root:{password}".encode())]
    site = write_site(tmp_path, 4, free_port())
    faults = tmp_path / "faults.yml"
    faults.write_text(yaml.safe_dump({"faults": {"h001": ["wrong_password"], "h002": ["http_503"]}}))
    db = tmp_path / "state" / "t.db"
    env = {**os.environ, PASSWORD_VAR: password}
    with SimProcess(site, password, tmp_path / "run", faults=faults) as sim:
        run = subprocess.Popen(
            [sys.executable, "-m", "provision.cli", "harvest-macs", "--site", str(site), "--db", str(db), "--json",
             "--retries", "1"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # The child's cmdline is only there once it has exec'd: watch until it shows or the run ends.
        seen_argv: list[bytes] = []
        deadline = time.monotonic() + 30
        while run.poll() is None and time.monotonic() < deadline:
            seen_argv += _cmdlines()
            if any(str(db).encode() in c for c in seen_argv):
                break
            time.sleep(0.01)
        stdout, stderr = run.communicate(timeout=120)
        assert run.returncode == 2, stderr.decode()
        assert b'"bmc_auth"' in stdout and b'"bmc_error_5xx"' in stdout

        # In-process too, with every logger at DEBUG (httpx/httpcore log each request there).
        monkeypatch.setenv(PASSWORD_VAR, password)
        caplog.set_level(logging.DEBUG)
        store = StateStore(tmp_path / "inproc.db")
        loaded = load_site(site)
        store.sync_site((h.hostname, h.rack) for h in loaded.hosts())
        results = asyncio.run(HarvestStep(loaded, store, RunOptions(client=ClientOptions(retries=0))).run(
            loaded.hosts()))
        sim_log = sim.log.read_bytes()

    assert caplog.records, "expected debug logging from the HTTP stack"
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix not in (".key",)]
    blobs = {
        "stdout": stdout, "stderr": stderr, "sim log": sim_log, "logs": caplog.text.encode(),
        "results": repr(results).encode(), **{str(p): p.read_bytes() for p in files if p.name != "faults.yml"},
    }
    for name, blob in blobs.items():
        for secret in secrets:
            assert secret not in blob, f"credential found in {name}"
    for cmdline in seen_argv:
        assert password.encode() not in cmdline, "credential found in a process's arguments"
    assert any(str(db).encode() in c for c in seen_argv), "the CLI process was not observed"


def test_kill_9_mid_harvest_loses_nothing_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    password = new_password()
    monkeypatch.setenv(PASSWORD_VAR, password)
    site = write_site(tmp_path, 40, free_port())
    db = tmp_path / "t.db"
    with SimProcess(site, password, tmp_path / "run", latency_ms=150) as sim:
        run = subprocess.Popen(
            [sys.executable, "-m", "provision.cli", "harvest-macs", "--site", str(site), "--db", str(db), "--json",
             "--concurrency", "3"],
            cwd=REPO, env={**os.environ, PASSWORD_VAR: password}, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        store = None
        while time.monotonic() < deadline:
            time.sleep(0.2)
            if db.exists():
                store = StateStore(db)
                if len(store.in_state(State.macs_harvested)) >= 3:
                    break
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=10)
        assert store is not None
        done_before = store.in_state(State.macs_harvested)
        assert 3 <= len(done_before) < 40, "the run should be cut off midway"
        history_before = {h: len(store.history(h)) for h in done_before}
        requests_before = {h: s["requests"] for h, s in sim.hosts().items()}

        loaded = load_site(site)
        results = asyncio.run(HarvestStep(loaded, store, RunOptions(concurrency=64)).run(loaded.hosts()))
        assert all(r.ok for r in results)
        assert len(store.in_state(State.macs_harvested)) == 40
        assert {h: len(store.history(h)) for h in done_before} == history_before
        after = sim.hosts()
        assert all(after[h]["requests"] == requests_before[h] for h in done_before)


def test_a_credential_that_does_not_resolve_stops_the_run_before_any_host_is_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PASSWORD_VAR, raising=False)
    site = load_site(write_site(tmp_path, 4, free_port()))  # nothing listens: a host touched would fail
    store = StateStore(tmp_path / "state.db")
    store.sync_site((h.hostname, h.rack) for h in site.hosts())
    events = store.event_count()
    with pytest.raises(CredentialError, match=f"environment variable {PASSWORD_VAR} is not set"):
        asyncio.run(HarvestStep(site, store).run(site.hosts()))
    assert store.event_count() == events
    assert all(store.get(h.hostname).state is State.declared for h in site.hosts())
