"""Ansible inventory from the site file and the lifecycle state store (plugin, CLI and static export)."""

from provision.ansible_inventory.build import (
    CONFIGURABLE_GROUP,
    Inventory,
    build_inventory,
    group_name,
    load_inventory,
)
from provision.ansible_inventory.export import to_ini, to_yaml

__all__ = [
    "CONFIGURABLE_GROUP",
    "Inventory",
    "build_inventory",
    "group_name",
    "load_inventory",
    "to_ini",
    "to_yaml",
]
