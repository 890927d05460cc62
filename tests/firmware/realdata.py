"""The real FirmwareInventory / Bios crawls in tests/fixtures/redfish/firmware/ (SOURCE.md there)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "redfish" / "firmware"
PREFIX = "_redfish_v1_UpdateService_FirmwareInventory_"


def load(vendor: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / vendor / name).read_text())
    return data


def inventory_members(vendor: str) -> list[dict[str, Any]]:
    """The members of the crawl's FirmwareInventory that it holds, in the collection's order."""
    listing = load(vendor, "_redfish_v1_UpdateService_FirmwareInventory.json")
    out = []
    for member in listing["Members"]:
        path = FIXTURES / vendor / (PREFIX + member["@odata.id"].rsplit("/", 1)[-1] + ".json")
        if path.exists():
            out.append(json.loads(path.read_text()))
    return out
