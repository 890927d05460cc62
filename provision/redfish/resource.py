"""The Redfish resource model: one resource as a BMC sent it, and its `@odata.id` navigation links."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provision.redfish.errors import RedfishProtocolError

ROOT = "/redfish/v1/"
# The largest collections a bring-up reads (DIMMs, PCIe functions, NIC ports) hold hundreds of members.
MAX_MEMBERS = 10_000


@dataclass(frozen=True)
class Resource:
    """One Redfish resource as the BMC sent it, with its ETag when the BMC offered one."""

    path: str
    data: Mapping[str, Any]
    etag: str | None = None
    status: int = 200

    def link(self, key: str) -> str | None:
        """The `@odata.id` of a navigation property, or None when the resource has no such link."""
        return odata_id(self.data.get(key))

    def require_link(self, key: str) -> str:
        found = self.link(key)
        if found is None:
            raise RedfishProtocolError(f"{self.path} has no {key} link", path=self.path)
        return found


def odata_id(value: Any) -> str | None:
    if isinstance(value, Mapping):
        target = value.get("@odata.id")
        if isinstance(target, str) and target.startswith("/"):
            return target
    return None


def first_link(value: Any, *keys: str) -> str | None:
    """The first `@odata.id` of a link or a list of links, found under `keys` (`first_link(system.data, "Links",
    "ManagedBy")`: `Links.ManagedBy[0]`); None where there is none."""
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    if isinstance(value, list):
        value = value[0] if value else None
    return odata_id(value)


def is_expanded(value: Any) -> bool:
    """Whether a navigation property carries the resource inline (`$expand`) rather than only its link."""
    return isinstance(value, Mapping) and odata_id(value) is not None and len(value) > 1


def sessions_path(root: Resource) -> str | None:
    """Where the service root says sessions are created, or None when the BMC offers no sessions."""
    links = root.data.get("Links")
    if isinstance(links, Mapping):
        found = odata_id(links.get("Sessions"))
        if found:
            return found
    service = root.link("SessionService")
    return f"{service.rstrip('/')}/Sessions" if service else None


def next_page(page: Resource, members: int, seen: set[str], endpoint: str) -> str | None:
    """The `Members@odata.nextLink` of a collection page, refusing a BMC whose pages loop back or whose
    collection outgrows `MAX_MEMBERS` (`members`: counted so far, this page included): such a walk
    would never end on its own."""
    if members > MAX_MEMBERS:
        raise RedfishProtocolError(f"{page.path}: the collection has more than {MAX_MEMBERS} members",
                                   endpoint=endpoint, path=page.path)
    nxt = page.data.get("Members@odata.nextLink")
    if not (isinstance(nxt, str) and nxt.startswith("/")):
        return None
    if nxt in seen:
        raise RedfishProtocolError(f"{page.path}: Members@odata.nextLink leads back to {nxt[:200]}",
                                   endpoint=endpoint, path=page.path)
    seen.add(nxt)
    return nxt
