"""The identifiers bringup compares across systems, each with one contract: any spelling a peer writes in, one
canonical form out, None for a value that is not one. Pure, standard library only, so every package (the
state store's facts, the BMC inventory, MAAS, the switches, the fabric's parsers) reads them the same way.

- A MAC: `B8:CE:F6:94:F0:B8`, `b8-ce-f6-94-f0-b8`, `b8ce.f694.f0b8` (Cisco) or `B8CEF694F0B8` →
  `b8:ce:f6:94:f0:b8`. `nic_mac` is the same spelling for a value that must name one NIC (a host fact, a
  BMC's inventory): a multicast or all-zero MAC is not one. A switch's tables are read with `canonical_mac`,
  as they are written (ntc-templates' SONiC captures hold `11:22:33:44:55:66`).
- An InfiniBand GUID (node, port or system GUID): `0x98039B03009FBE9A`, `98039b03009fbe9a`,
  `9803:9b03:009f:be9a` or a short `0x2c90000000001` (UFM, fabric simulators) → 16 lower-case hex digits
  (`98039b03009fbe9a`), the key every table is indexed by; `guid_0x` gives the `0x…` spelling the
  InfiniBand tools print, which facts, JSON and messages use.
"""

from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[:.\-\s]")
_HEX12 = re.compile(r"^[0-9a-f]{12}$")
_HEX_GUID = re.compile(r"^[0-9a-f]{1,16}$")


def canonical_mac(value: object) -> str | None:
    """The MAC as `aa:bb:cc:dd:ee:ff`, or None when `value` is not 12 hex digits (separators `:`, `-`, `.`)."""
    if not isinstance(value, str):
        return None
    raw = _SEPARATORS.sub("", value.strip().lower())
    return ":".join(raw[i : i + 2] for i in range(0, 12, 2)) if _HEX12.match(raw) else None


def nic_mac(value: object) -> str | None:
    """`canonical_mac` of a MAC that can name one NIC (unicast, not zero), else None."""
    mac = canonical_mac(value)
    return None if mac is None or mac == "00:00:00:00:00:00" or int(mac[:2], 16) & 1 else mac


def canonical_guid(value: object) -> str | None:
    """The GUID as 16 lower-case hex digits, or None when `value` is not one (1 to 16 hex digits, `0x` optional)."""
    if not isinstance(value, str):
        return None
    raw = _SEPARATORS.sub("", value.strip().lower().removeprefix("0x"))
    return raw.zfill(16) if _HEX_GUID.match(raw) else None


def guid_0x(guid: str) -> str:
    """A canonical GUID as the InfiniBand tools print it: `0x98039b03009fbe9a`."""
    return "0x" + guid
