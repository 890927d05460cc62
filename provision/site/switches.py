"""The site's management / PXE switches: the switches `provision ethernet check` reads.

    switches:
      tor-r1: {platform: cisco_nxos, address: 10.0.0.11, credential: switch_admin, location: r1}
      tor-r2: {platform: sonic, address: tor-r2.mgmt.example, port: 22, credential: switch_admin,
               location: r2, ports: 48}

`platform` is the switch's NOS (cisco_nxos, arista_eos, dell_os10, sonic), `credential` an entry of the
site's `credentials` (user name, password from the environment or a vault: never in this file), `location`
the rack it stands in (the rack's top-of-rack switch for the Ethernet design's rule) or any other place
("network row B"), `ports` how many ports it has (default 48). Validated when the site loads: the
credential must be declared, and no two switches share an address and port. The per-host cabling (which
switch port each BMC and PXE NIC is in, or the rule) stays in `ethernet.yml` beside the site file
(provision/ethernet/design.py), which names these switches.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from provision.site.fields import check_address

Platform = Literal["cisco_nxos", "arista_eos", "dell_os10", "sonic"]
PLATFORMS: tuple[str, ...] = ("cisco_nxos", "arista_eos", "dell_os10", "sonic")


class ManagementSwitch(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    platform: Platform
    address: str = Field(min_length=1, max_length=253)
    port: int = Field(default=22, ge=1, le=65535)
    credential: str = Field(min_length=1, description="name of an entry in 'credentials'")
    location: str = Field(default="", max_length=128)
    ports: int = Field(default=48, ge=1, le=1024)

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        return check_address(value)


def switch_problems(switches: Mapping[str, ManagementSwitch],
                    credentials: Mapping[str, object]) -> list[tuple[tuple[int | str, ...], str]]:
    """(path, why) for each switch naming an undeclared credential or sharing another's address and port."""
    problems: list[tuple[tuple[int | str, ...], str]] = []
    endpoints = Counter((s.address, s.port) for s in switches.values())
    known = ", ".join(sorted(credentials)) or "none declared"
    for name, s in sorted(switches.items()):
        if s.credential not in credentials:
            problems.append((("switches", name, "credential"), f"unknown credential {s.credential!r} (known: {known})"))
        if endpoints[(s.address, s.port)] > 1:
            problems.append((("switches", name, "address"), f"{s.address}:{s.port} is shared with another switch"))
    return problems
