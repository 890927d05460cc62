"""`ansible-playbook site.yml` as users type it: from the repository root, without -i (ansible.cfg's inventory is
the state store of $BRINGUP_SITE or the embedded site), failing with the reason when no host is to configure."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from provision.site import load_site
from provision.state import State, StateStore
from tests.ansible.conftest import BIN, REPO
from tests.ansible.test_inventory import SITE as MINI_SITE

pytestmark = pytest.mark.tools("ansible-playbook")

EMBEDDED = REPO / "inventory" / "sim" / "site.yml"


def _ansible(tool: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("BRINGUP_SITE", "BRINGUP_STATE_DB", "ANSIBLE_CONFIG",
                                                           "ANSIBLE_INVENTORY")}
    return subprocess.run([str(BIN / tool), *args], cwd=REPO, env={**base, "ANSIBLE_NOCOLOR": "1", **env},
                          capture_output=True, text=True, timeout=120, check=False)


def test_root_site_yml_without_inventory_fails_naming_the_states_when_nothing_is_deployed(tmp_path: Path) -> None:
    # No $BRINGUP_SITE: the embedded site; a fresh store declares all of its GPU hosts.
    done = _ansible("ansible-playbook", "site.yml", env={"BRINGUP_STATE_DB": str(tmp_path / "fresh.db")})
    out = done.stdout + done.stderr
    gpu = sorted(h.hostname for h in load_site(EMBEDDED).hosts() if h.role.value == "gpu")
    assert done.returncode != 0, out[-3000:]
    assert "could not be found" not in out and "no hosts matched" not in out.lower()
    assert "no GPU host is deployed yet: run `provision maas deploy`" in out
    assert f"GPU hosts by state: declared: {', '.join(gpu[:5])} (+{len(gpu) - 5} more)" in out


def test_a_limit_that_matches_no_configurable_host_fails_naming_the_configurable_ones(tmp_path: Path) -> None:
    site = tmp_path / "mini.yml"
    site.write_text(MINI_SITE)
    db = tmp_path / "mini.db"
    loaded = load_site(site)
    with StateStore(db) as store:
        store.sync_site((h.hostname, h.rack) for h in loaded.hosts())
        store.mark("gpu-a-02", State.deployed, reason="test", command="test")
    env = {"BRINGUP_SITE": str(site), "BRINGUP_STATE_DB": str(db)}
    done = _ansible("ansible-playbook", "site.yml", "--limit", "gpu-b-01", env=env)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-3000:]
    assert "no GPU host matches --limit gpu-b-01 among the configurable ones (gpu-a-02)" in out
    assert "GPU hosts by state: declared: gpu-a-01, gpu-b-01; deployed: gpu-a-02" in out
    # The same default inventory is what ansible-inventory lists without -i.
    listed = _ansible("ansible-inventory", "--list", env=env)
    assert listed.returncode == 0, listed.stderr[-2000:]
    groups = json.loads(listed.stdout)
    assert groups["configurable"]["hosts"] == ["gpu-a-02"]
    assert sorted(groups["role_gpu"]["hosts"]) == ["gpu-a-01", "gpu-a-02", "gpu-b-01"]
