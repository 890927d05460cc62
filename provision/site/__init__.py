"""The site model: racks, hosts, expected hardware, networks, credential references.

Exports are loaded lazily so that commands which only need the site's index (see `index.py`) do not
pay for building the pydantic models.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from provision.site.loader import load_site
    from provision.site.model import Host, HostClass, Rack, Role, Site, SiteSpec
    from provision.site.paths import SitePaths, resolve_site_path

_EXPORTS = {
    "load_site": "provision.site.loader",
    "resolve_site_path": "provision.site.paths",
    "SitePaths": "provision.site.paths",
    "Host": "provision.site.model",
    "HostClass": "provision.site.model",
    "Rack": "provision.site.model",
    "Role": "provision.site.model",
    "Site": "provision.site.model",
    "SiteSpec": "provision.site.model",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'provision.site' has no attribute {name!r}")


__all__ = ["Host", "HostClass", "Rack", "Role", "Site", "SitePaths", "SiteSpec", "load_site", "resolve_site_path"]
