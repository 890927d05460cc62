"""The names a host's NIC may be advertised under in LLDP, and the names an LLDP neighbour goes by.

A PXE NIC is heard by its host's name (the OS's lldpd announces the hostname, often as an FQDN). A BMC
announces its own name, never the host's: `<host>-bmc`, `<host>-idrac` and the like, its DNS name when the
site gives its address as one, or the iDRAC default `idrac-<service tag>`, each perhaps with a domain. A
neighbour goes by its system name without the domain, and by the words of its port description (an
operator's "gpu-r1-02 iDRAC", lldpd's "gpu-r1-02:eno1"): either may carry the name the design expects.
The host's bare name is never a BMC's, so a PXE NIC's LLDP is never taken for its BMC's.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from provision.ethernet.parse import LldpNeighbour

if TYPE_CHECKING:
    from provision.site import Site

BMC_SUFFIXES = ("-bmc", "bmc", "-idrac", "-ipmi", "-ilo", "-oob", "-mgmt")
NOT_ADVERTISED = {"", "not advertised", "not-advertised", "-", "n/a"}


def _label(name: str) -> str:
    """gpu-r1-02.lab.example -> gpu-r1-02 (lower case); an address stays whole."""
    name = name.strip().strip('"').lower()
    try:
        ipaddress.ip_address(name)
        return name
    except ValueError:
        return name.split(".")[0]


def advertised_names(host: str, role: str, bmc_address: str = "", service_tag: str | None = None) -> frozenset[str]:
    """The names (first labels, lower case) the NIC of `role` on `host` may be advertised under."""
    base = _label(host)
    if role != "bmc":
        return frozenset({base})
    names = {base + suffix for suffix in BMC_SUFFIXES}
    if bmc_address and not _is_address(bmc_address):
        names.add(_label(bmc_address))
    if service_tag:
        names.add(f"idrac-{service_tag.lower()}")
    names.discard(base)
    return frozenset(names)


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


TRUNCATED = "..."  # Dell OS10's `show lldp neighbors` cuts a long system name to 17 characters and "..."
MIN_PREFIX = 12  # a name cut inside its first label matches a NIC's name it starts, if this much is left


def goes_by(n: LldpNeighbour, names: frozenset[str]) -> bool:
    """Whether neighbour `n` goes by one of `names` (exactly, or by a cut system name's prefix)."""
    if names & neighbour_names(n):
        return True
    return any(name.startswith(prefix) for prefix in truncated_prefixes(n) for name in names)


def truncated_prefixes(n: LldpNeighbour) -> list[str]:
    """A system name cut inside its first label: that label's start (a cut after the first dot left the
    label whole: neighbour_names has it)."""
    name = n.name.strip().lower()
    cut = name[: -len(TRUNCATED)] if name.endswith(TRUNCATED) else ""
    return [cut] if "." not in cut and len(cut) >= MIN_PREFIX else []


def neighbour_names(n: LldpNeighbour) -> set[str]:
    """Every name the neighbour goes by: its system name's first label, and the words of its port description."""
    names = set()
    name = n.name.strip()
    if name.endswith(TRUNCATED):  # cut by the switch: its first label is whole when a dot came before the cut
        if "." in name[: -len(TRUNCATED)]:
            names.add(_label(name[: -len(TRUNCATED)]))
    elif name.lower() not in NOT_ADVERTISED:
        names.add(_label(name))
    names.update(_label(w) for w in re.split(r"[\s:,;/()\[\]]+", n.description) if w)
    return names


def site_names(site: Site, hosts: Iterable[str], service_tags: Mapping[str, str | None] | None = None,
               ) -> dict[tuple[str, str], frozenset[str]]:
    """(host, role) -> advertised names for `hosts`, with each BMC's address from the site and its service
    tag from the host facts (harvest-macs) where known."""
    tags = service_tags or {}
    out = {}
    for name in hosts:
        host = site.host(name)
        out[(name, "pxe")] = advertised_names(name, "pxe")
        out[(name, "bmc")] = advertised_names(name, "bmc", str(host.bmc.address) if host else "", tags.get(name))
    return out
