"""Ansible inventory plugin `bringup_state`: the site file plus the lifecycle state store.

A config file named `*.bringup_state.yml` (paths relative to it):

    plugin: bringup_state
    site: sim/site.yml        # optional; default $BRINGUP_SITE, else the embedded inventory/sim/site.yml
    db: sim/state/sim.db      # optional; default $BRINGUP_STATE_DB, else state/<site>.db beside the site file

Without `site` it reads the default site the `provision` CLI uses, so `inventory/default.bringup_state.yml`
(ansible.cfg's inventory) is the state store of `$BRINGUP_SITE` or the embedded site.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleParserError  # type: ignore[import-untyped]
from ansible.plugins.inventory import BaseInventoryPlugin  # type: ignore[import-untyped]

from provision.ansible_inventory.build import load_inventory
from provision.ansible_inventory.sources import site_file
from provision.errors import BringupError

DOCUMENTATION = r"""
name: bringup_state
short_description: GPU hosts from the bringup site file and lifecycle state store
description:
  - Groups per rack, role, host class and lifecycle state, and C(configurable) for site.yml.
  - Host variables for SSH, the BMC address and the hardware the host class expects.
options:
  plugin:
    description: Must be bringup_state.
    required: true
    choices: [bringup_state]
  site:
    description:
      - Site file, relative to this config file.
      - Default the environment variable E(BRINGUP_SITE) (relative to the working directory), else the
        embedded simulated site (inventory/sim/site.yml of the repository).
    required: false
    type: str
  db:
    description:
      - State database, relative to this config file.
      - Default the environment variable E(BRINGUP_STATE_DB), else state/<site>.db beside the site.
    required: false
    type: str
"""


class InventoryModule(BaseInventoryPlugin):  # type: ignore[misc]
    NAME = "bringup_state"

    def verify_file(self, path: str) -> bool:
        return bool(super().verify_file(path)) and path.endswith((".bringup_state.yml", ".bringup_state.yaml"))

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        base = Path(os.path.dirname(os.path.abspath(path)))
        site = site_file(base, self.get_option("site"))
        db_option = self.get_option("db")
        db = base / str(db_option) if db_option else None
        try:
            built = load_inventory(site, db)
        except BringupError as exc:
            raise AnsibleParserError(f"bringup_state inventory {path}: {exc}") from exc
        for key, value in built.all_vars.items():
            inventory.set_variable("all", key, value)
        for group, hosts in built.groups.items():
            inventory.add_group(group)
            for host in hosts:
                inventory.add_host(host, group=group)
        for host, hostvars in built.hostvars.items():
            inventory.add_host(host)
            for key, value in hostvars.items():
                inventory.set_variable(host, key, value)
