"""The lab's process manager starts, probes and stops simulators, and leaves nothing behind."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from sim.addresses import AddressPlanError, bmc_address, check_loopback, lab_host_address
from sim.addresses import free_port as _free_port
from sim.lab import Lab, LabError, Service, tcp_probe
from tests.processes import alive, gone_within


def _server(tmp_path: Path, name: str, host: str = "127.0.3.1", *, grandchild: bool = False) -> Service:
    port = _free_port(host)
    code = textwrap.dedent(f"""
        import os, socket, subprocess, sys, time
        if {grandchild!r}:
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            open({str(tmp_path / (name + ".grandchild"))!r}, "w").write(str(child.pid))
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(({host!r}, {port})); s.listen()
        while True:
            c, _ = s.accept(); c.close()
    """)
    return Service(name=name, argv=[sys.executable, "-c", code], probe=tcp_probe(host, port), start_timeout_s=15)


def test_up_waits_for_health_and_down_stops_the_whole_process_group(tmp_path: Path) -> None:
    lab = Lab([_server(tmp_path, "alpha", grandchild=True), _server(tmp_path, "beta", "127.0.3.2")], tmp_path / "run")
    lab.up()
    try:
        status = lab.status()
        assert status["alpha"]["healthy"] and status["beta"]["healthy"]
        pids = lab.running()
        assert set(pids) == {"alpha", "beta"}
        assert (tmp_path / "run" / "alpha.pid").read_text().strip() == str(pids["alpha"])
        grandchild = int((tmp_path / "alpha.grandchild").read_text())
        assert alive(grandchild)
    finally:
        stopped = lab.down()
    assert sorted(stopped) == ["alpha", "beta"]
    assert all(gone_within(p, 5) for p in pids.values())
    assert gone_within(grandchild, 5), "a simulator's child outlived `down`"
    assert not list((tmp_path / "run").glob("*.pid"))


def test_up_twice_keeps_the_healthy_services(tmp_path: Path) -> None:
    lab = Lab([_server(tmp_path, "alpha")], tmp_path / "run")
    with lab.running_lab():
        first = lab.running()["alpha"]
        Lab(lab.services, tmp_path / "run").up()
        assert lab.running()["alpha"] == first


def test_a_second_lab_object_can_stop_what_another_started(tmp_path: Path) -> None:
    """`sim up` and `sim down` are separate processes: pid files are the only link between them."""
    svc = _server(tmp_path, "alpha")
    Lab([svc], tmp_path / "run").up()
    pid = Lab([svc], tmp_path / "run").running()["alpha"]
    assert Lab([svc], tmp_path / "run").down() == ["alpha"]
    assert gone_within(pid, 5)


def test_a_service_that_dies_at_start_is_reported_with_its_log(tmp_path: Path) -> None:
    bad = Service("broken", [sys.executable, "-c", "import sys; print('bind failed: boom'); sys.exit(3)"],
                  probe=lambda: False, start_timeout_s=10)
    lab = Lab([_server(tmp_path, "alpha"), bad], tmp_path / "run")
    with pytest.raises(LabError, match=r"broken exited with code 3 while starting: bind failed: boom"):
        lab.up()
    assert lab.running() == {}, "a failed `up` must stop what it had started"


def test_a_service_that_never_answers_times_out_and_is_stopped(tmp_path: Path) -> None:
    mute = Service("mute", [sys.executable, "-c", "import time; time.sleep(600)"], probe=lambda: False,
                   start_timeout_s=1)
    lab = Lab([mute], tmp_path / "run")
    with pytest.raises(LabError, match="did not become healthy within 1 s"):
        lab.up()
    assert lab.running() == {}


def test_address_plan_is_loopback_only() -> None:
    assert check_loopback("127.0.16.5") == "127.0.16.5"
    for bad in ("10.0.0.1", "192.168.1.1", "8.8.8.8", "bmc.example.com"):
        with pytest.raises(AddressPlanError):
            check_loopback(bad)
    assert bmc_address(0) == "127.0.16.1" and bmc_address(253) == "127.0.16.254" and bmc_address(254) == "127.0.17.1"
    assert lab_host_address(4) == "127.0.1.4"
    with pytest.raises(AddressPlanError):
        bmc_address(16 * 254)
