"""The site model: racks, hosts, expected hardware, networks, credential references."""

from provision.site.loader import load_site, resolve_site_path
from provision.site.model import Host, HostClass, Rack, Role, Site, SiteSpec

__all__ = ["Host", "HostClass", "Rack", "Role", "Site", "SiteSpec", "load_site", "resolve_site_path"]
