"""The site's `rollout` section: validated at load, handed to the roles (inventory) and to play keywords (lookup)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.ansible_inventory import load_inventory
from provision.errors import SiteError
from provision.site import load_site
from tests.ansible.test_inventory import SITE as MINI_SITE

REPO = Path(__file__).resolve().parents[2]


def _site(tmp_path: Path, rollout: dict[str, Any] | None, name: str = "mini.yml") -> Path:
    doc = yaml.safe_load(MINI_SITE)
    if rollout is not None:
        doc["rollout"] = rollout
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.parametrize(("rollout", "expected"), [
    ({"apt_proxy": "https://ctl-01:3142"}, "rollout.apt_proxy: apt_proxy must be an http:// URL"),
    ({"apt_proxy": "http://ctl-01:3142/acng"}, "rollout.apt_proxy: apt_proxy is the proxy's address only"),
    ({"apt_proxy": "http://ops:secret@ctl-01:3142"}, "rollout.apt_proxy: apt_proxy must not carry credentials"),
    ({"batches": [0]}, "rollout.batches: a batch of 0 hosts"),
    ({"batches": [1, "150%"]}, "rollout.batches: batch '150%' is neither a host count nor a percentage"),
    ({"batches": []}, "rollout.batches"),
    ({"max_fail_percentage": 101}, "rollout.max_fail_percentage"),
    ({"forks": 0}, "rollout.forks"),
    ({"serial": 2}, "rollout.serial: unknown field"),
])
def test_a_bad_rollout_is_refused_at_load_naming_the_field(tmp_path: Path, rollout: dict[str, Any],
                                                          expected: str) -> None:
    with pytest.raises(SiteError) as info:
        load_site(_site(tmp_path, rollout))
    assert expected in str(info.value)


def test_the_roles_get_the_rollout_as_bringup_rollout_with_the_proxy_split(tmp_path: Path) -> None:
    site = _site(tmp_path, {"apt_proxy": "http://ctl-01:3142", "batches": [1, "10%"], "max_fail_percentage": 5})
    rollout = load_inventory(site, tmp_path / "mini.db").all_vars["bringup_rollout"]
    assert rollout == {"apt_proxy": "http://ctl-01:3142", "apt_proxy_host": "ctl-01", "apt_proxy_port": 3142,
                       "batches": [1, "10%"], "max_fail_percentage": 5, "forks": 16}
    # A site without the section: every host at once, no proxy.
    plain = load_inventory(_site(tmp_path, None, "plain.yml"), tmp_path / "plain.db").all_vars["bringup_rollout"]
    assert plain["apt_proxy"] == "" and plain["batches"] == ["100%"]


EVAL = Path(__file__).with_name("rollout_lookup_eval.py")


def _lookups(*calls: tuple[list[str], dict[str, Any]]) -> list[dict[str, Any]]:
    """The lookup's answers, run in a child process (importing Ansible patches sys.intern, which torch.compile in
    this pytest process then refuses to trace)."""
    payload = json.dumps([{"terms": terms, "variables": variables} for terms, variables in calls])
    done = subprocess.run([sys.executable, str(EVAL)], input=payload, capture_output=True, text=True, check=True,
                          timeout=120, env=os.environ.copy())
    return list(json.loads(done.stdout))


def test_the_lookup_reads_the_site_of_the_runs_bringup_state_inventory(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRINGUP_SITE", raising=False)
    _site(tmp_path, {"batches": [2, "25%"], "max_fail_percentage": 10})
    config = tmp_path / "inventory" / "lab.bringup_state.yml"
    config.parent.mkdir()
    config.write_text("plugin: bringup_state\nsite: ../mini.yml\n")
    # The config as -i names it, or the folder holding it.
    answers = _lookups(*((["batches", "max_fail_percentage"], {"ansible_inventory_sources": [str(source)]})
                         for source in (config, config.parent)))
    assert answers == [{"result": [[2, "25%"], 10]}] * 2
    # No bringup_state source (a static export): $BRINGUP_SITE, else the embedded site.
    static = tmp_path / "hosts.ini"
    static.write_text("[all]\n")
    assert _lookups((["batches"], {"ansible_inventory_sources": [str(static)]})) == [{"result": [["100%"]]}]
    monkeypatch.setenv("BRINGUP_SITE", str(tmp_path / "mini.yml"))
    assert _lookups((["forks"], {"ansible_inventory_sources": [str(static)]})) == [{"result": [16]}]


def test_the_lookup_refuses_a_run_over_two_sites_and_an_unknown_setting(tmp_path: Path) -> None:
    for name in ("one", "two"):
        _site(tmp_path, None, f"{name}.yml")
        (tmp_path / f"{name}.bringup_state.yml").write_text(f"plugin: bringup_state\nsite: {name}.yml\n")
    sources = [str(tmp_path / "one.bringup_state.yml"), str(tmp_path / "two.bringup_state.yml")]
    two_sites, unknown = _lookups((["batches"], {"ansible_inventory_sources": sources}),
                                  (["serial"], {"ansible_inventory_sources": sources[:1]}))
    assert two_sites["lookup_error"] and "the inventory reads 2 sites" in two_sites["error"]
    assert unknown["lookup_error"] and "no setting" in unknown["error"]
