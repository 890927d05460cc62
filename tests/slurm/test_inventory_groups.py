"""The Ansible inventory's Slurm groups: the controller play runs only on a controller bringup can configure."""

from __future__ import annotations

from pathlib import Path

from provision.ansible_inventory.build import load_inventory
from provision.site.store import open_store
from tests.slurm.conftest import slurm_site


def test_the_controller_is_configured_only_once_it_is_deployed(tmp_path: Path) -> None:
    site = slurm_site(tmp_path)
    db = tmp_path / "state.db"
    store = open_store(site, db)
    store.sync_site((h.hostname, h.rack) for h in site.hosts())
    inventory = load_inventory(site.path, db)
    assert inventory.groups["slurm_controller"] == ()  # ctl-01 only declared: no play tries to reach it
    assert len(inventory.groups["slurm_nodes"]) == 16
    store.mark("ctl-01", "deployed", reason="head node installed by hand")
    assert load_inventory(site.path, db).groups["slurm_controller"] == ("ctl-01",)
