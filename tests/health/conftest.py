"""A generated site of simulated SSH hosts that replay the captured H200 outputs, with faults per host."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.site import load_site
from provision.site.model import Site
from provision.state import State, StateStore
from sim.sshhosts.harness import REPLAY_ROOT, SshLab, replayed_machine
from sim.sshhosts.sitegen import write_site

needs_replay = pytest.mark.skipif(
    not (REPLAY_ROOT / "expectations-h200x2-ib.json").is_file(),
    reason="the health agent's replay fixtures (tests/fixtures/tools/replay) are not in this checkout",
)


@dataclass
class SimSite:
    site: Site
    store: StateStore
    env: dict[str, str]
    directory: Path
    lab: SshLab


def make_sim_site(
    directory: Path, count: int, hosts: dict[str, dict[str, Any]], *, policy: dict[str, Any] | None = None
) -> tuple[Path, Path]:
    class_spec, overlay = replayed_machine()
    site_file = write_site(directory, count, class_spec=class_spec, host_class="h200x2", name="simtest",
                           policy=policy or {"golden_requires_burn_in": False})
    (directory / "health-expectations.yml").write_text(yaml.safe_dump({"host_classes": {"h200x2": overlay}}))
    faults = directory / "health-faults.yml"
    faults.write_text(yaml.safe_dump({"fixture_root": str(REPLAY_ROOT), "default_fixture": "h200x2-ib-healthy",
                                      "hosts": hosts}))
    return site_file, faults


@pytest.fixture
def sim_site_factory(tmp_path: Path) -> Iterator[Any]:
    labs: list[SshLab] = []

    def start(count: int, hosts: dict[str, dict[str, Any]], state: State = State.configured, **kw: Any) -> SimSite:
        directory = tmp_path / f"site{len(labs)}"
        site_file, faults = make_sim_site(directory, count, hosts, **kw)
        lab = SshLab(site_file, faults, directory / "state" / "lab")
        labs.append(lab)
        lab.__enter__()
        site = load_site(site_file)
        store = StateStore(directory / "state" / "simtest.db", actor="test")
        store.sync_site((h.hostname, h.rack) for h in site.hosts())
        for host in site.hosts():
            store.mark(host.hostname, state, reason="test setup")
        return SimSite(site, store, lab.env, directory, lab)

    yield start
    for lab in labs:
        lab.__exit__(None, None, None)
