"""`provision maas deploy` killed (SIGKILL) at every point between the intent written before a MAAS action and
its record: the action arriving at MAAS (nothing done), MAAS having acted (its answer never arrives), and the
read that shows the deployment done. The next run reads MAAS's machine list for each open intent, records
the machine's status in the host's history, says so, and goes on from that status: a deployment MAAS
finished is recorded without being asked again, one MAAS never received is asked now.

The kills come from a test wrapper around the in-process MAAS simulator's actions (as `LostAnswers` wraps
them), never from product code; each kill point runs as its own CLI process, all at once. MAAS's behaviour
is the simulator's (statuses and their names from maasserver.enum.NODE_STATUS).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from provision.cli import main
from provision.state import State, StateStore
from provision.state.intents import RECONCILED, open_intents
from sim.maas.machines import NodeStatus
from tests.maas.conftest import API_KEY, RunningMaas
from tests.redfish.killing_sim import CliProcesses
from tests.sites import copy_sim_site

BMC_PASSWORD = "bmc-pw-123"
SETTLING = {NodeStatus.COMMISSIONING, NodeStatus.DEPLOYING, NodeStatus.RELEASING, NodeStatus.DISK_ERASING,
            NodeStatus.TESTING}


@dataclass(frozen=True)
class Point:
    """Kill at MAAS's `action` for the host (`acted`: once MAAS has done it), the machine held beforehand in
    `held` (None: MAAS does not know the host yet); the open intents it leaves and what MAAS then says."""

    held: NodeStatus | None
    action: str
    acted: bool
    left: tuple[str, ...]
    says: str


POINTS = {
    "gpu-r1-01": Point(None, "create", False, ("enlist",), "MAAS has no machine"),
    "gpu-r1-02": Point(None, "create", True, ("enlist",), "MAAS says Ready"),
    "gpu-r1-03": Point(NodeStatus.NEW, "commission", False, ("commission",), "MAAS says New"),
    "gpu-r1-04": Point(NodeStatus.NEW, "commission", True, ("commission",), "MAAS says Ready"),
    "gpu-r1-05": Point(NodeStatus.READY, "allocate", False, ("allocate",), "MAAS says Ready"),
    "gpu-r1-07": Point(NodeStatus.READY, "deploy", False, ("allocate", "deploy"), "MAAS says Allocated"),
    "gpu-r1-08": Point(NodeStatus.READY, "deploy", True, ("allocate", "deploy"), "MAAS says Deployed"),
    "gpu-r2-01": Point(NodeStatus.READY, "get", True, ("allocate", "deploy"), "MAAS says Deployed"),
    "gpu-r2-02": Point(NodeStatus.FAILED_DEPLOYMENT, "release", False, ("release",), "MAAS says Failed deployment"),
}


def _mac(i: int) -> str:
    return f"b8:ce:f6:00:09:{i:02x}"


class Killer:
    """Wraps the simulator's actions: kills the CLI process acting for a host at its point, counts calls."""

    def __init__(self, maas: RunningMaas) -> None:
        self.sim = maas.sim
        self.pids: dict[str, int] = {}
        self.fired: set[str] = set()
        self.calls: dict[tuple[str, str], int] = {}
        for action, host_of in (("create", lambda a: a[0]["hostname"][0]), ("commission", lambda a: a[0].hostname),
                                ("allocate", lambda a: self.sim.machines[a[0]["system_id"][0]].hostname),
                                ("deploy", lambda a: a[0].hostname), ("release", lambda a: a[0].hostname)):
            setattr(self.sim, action, self._wrap(action, getattr(self.sim, action), host_of))
        self._get = self.sim.get
        self.sim.get = self._read  # type: ignore[method-assign]

    def _kill(self, host: str) -> None:
        deadline = time.monotonic() + 10
        while host not in self.pids and time.monotonic() < deadline:
            time.sleep(0.01)
        self.fired.add(host)
        os.kill(self.pids[host], signal.SIGKILL)

    def _due(self, host: str, action: str) -> bool:
        point = POINTS.get(host)
        return point is not None and point.action == action and host not in self.fired and host in self.pids

    def _wrap(self, action: str, original: Callable[..., Any], host_of: Callable[[tuple[Any, ...]], str]
              ) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            host = host_of(args)
            if self._due(host, action) and not POINTS[host].acted:
                self._kill(host)
                raise KeyError("the caller was killed before MAAS acted")  # answered 404, to nobody
            result = original(*args, **kwargs)
            self.calls[(host, action)] = self.calls.get((host, action), 0) + 1  # the actions MAAS carried out
            if self._due(host, action):
                self._kill(host)
            return result
        return wrapped

    def _read(self, system_id: str) -> Any:
        machine = self._get(system_id)
        if machine.status is NodeStatus.DEPLOYED and self._due(machine.hostname, "get"):
            self._kill(machine.hostname)
        return machine


@pytest.fixture
def site(tmp_path: Path, maas: RunningMaas, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("BRINGUP_SIM_MAAS_API_KEY", API_KEY)
    monkeypatch.setenv("BRINGUP_SIM_BMC_PASSWORD", BMC_PASSWORD)
    site_file = copy_sim_site(tmp_path / "site")
    site_file.write_text(site_file.read_text().replace("http://127.0.2.1:5240/MAAS/", maas.url))
    with StateStore(tmp_path / "site" / "state" / "sim.db") as store:
        store.sync_site([(h, h[4:6]) for h in POINTS])
        for i, host in enumerate(POINTS):
            store.transition(host, State.bmc_reachable, command="test")
            macs = {"NIC.Integrated.1-1-1": _mac(i)}
            store.transition(host, State.macs_harvested, command="test", evidence={"inventory": {"macs": macs}},
                             facts={"pxe_mac": _mac(i), "macs": macs})
            store.transition(host, State.pxe_armed, command="test")
            if (held := POINTS[host].held) is not None:
                machine = maas.sim.create({"hostname": [host], "architecture": ["amd64/generic"],
                                           "mac_addresses": [_mac(i)], "power_type": ["manual"],
                                           "commission": ["false"]})
                machine.status = held
    yield site_file


def _settled(maas: RunningMaas) -> None:
    deadline = time.monotonic() + 10
    while any(m.status in SETTLING for m in list(maas.sim.machines.values())) and time.monotonic() < deadline:
        time.sleep(0.02)


def test_maas_deploy_killed_at_every_point_is_recorded_from_maas_and_finished_without_asking_twice(
        site: Path, maas: RunningMaas, capsys: pytest.CaptureFixture[str]) -> None:
    killer = Killer(maas)
    cli = CliProcesses()
    env = dict(os.environ)
    runs = {}
    try:
        for host in POINTS:
            runs[host] = cli.start(["maas", "deploy", "--site", str(site), "--hosts", host, "--json", "--poll", "0.02",
                                    "--timeout", "20"], env)
            killer.pids[host] = runs[host].pid or 0
        for host, run in runs.items():
            run.join(timeout=60)
            assert run.exitcode == -signal.SIGKILL, f"{host}: exit {run.exitcode}"
    finally:
        for run in runs.values():
            if run.is_alive():
                run.kill()
                run.join(timeout=10)
        cli.close()
    assert killer.fired == set(POINTS)
    _settled(maas)
    with StateStore(site.parent / "state" / "sim.db") as store:
        for host, point in POINTS.items():
            left = open_intents(store, hosts=[host], dead_only=True)
            assert tuple(i.action for i in left) == point.left, host
        deploys_before = {h: killer.calls.get((h, "deploy"), 0) for h in POINTS}

        capsys.readouterr()
        code = main(["maas", "deploy", "--site", str(site), "--json", "--poll", "0.02", "--timeout", "20",
                     "--hosts", ",".join(POINTS)])
        rows = {r["host"]: r for r in json.loads(capsys.readouterr().out)}
        assert code == 0, rows
        for host, point in POINTS.items():
            assert rows[host]["state"] == "deployed", host
            lines = rows[host]["reconciled"]
            assert len(lines) == len(point.left) and all(point.says in line for line in lines), (host, lines)
            assert all(line.startswith("a run of `maas-deploy` died after asking MAAS to ") for line in lines)
            notes = [e for e in store.history(host) if e.reason == RECONCILED]
            assert len(notes) == 1 and notes[0].evidence["said"] == lines
        # MAAS had the deployment (done, or under way): recorded, not asked again; never received: asked now
        for host in ("gpu-r1-08", "gpu-r2-01"):
            assert killer.calls[(host, "deploy")] == deploys_before[host] == 1
        assert killer.calls[("gpu-r1-07", "deploy")] == deploys_before["gpu-r1-07"] + 1
        assert sum(m.hostname == "gpu-r1-02" for m in maas.sim.machines.values()) == 1  # adopted, not enlisted again
        assert open_intents(store) == []
