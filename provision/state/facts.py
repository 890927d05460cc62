"""Host facts: what the bring-up has learnt about a host (its MACs, serial, MAAS id, OS address...).

Current values only, one set per host: the step that learns a fact writes it, the steps after it read
it. The history of how it was learnt stays in the events' evidence. Pure, no I/O: values are checked
and brought to one form here (MACs `aa:bb:cc:dd:ee:ff`, GUIDs `0x` and 16 hex digits, addresses as
`ipaddress` writes them), and a value that is not what its fact holds is a `StateError` naming the fact.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from provision.errors import StateError
from provision.state.identifiers import canonical_guid, guid_0x, nic_mac

TEXT_FACTS = ("pxe_nic", "serial", "service_tag", "model", "redfish_system_id", "bios_version", "bmc_firmware",
              "maas_system_id")
MAC_FACTS = ("pxe_mac", "bmc_mac")
FACT_NAMES: tuple[str, ...] = (
    "pxe_nic", "pxe_mac", "macs", "serial", "service_tag", "model", "redfish_system_id", "bios_version",
    "bmc_firmware", "bmc_mac",
    "maas_system_id", "os_address", "hca_guids",
)
_TEXT = re.compile(r"^[^\x00-\x1f\x7f]{1,128}$")
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


@dataclass(frozen=True)
class HostFacts:
    """One host's facts; None where the bring-up has not learnt the fact (yet)."""

    pxe_nic: str | None = None
    pxe_mac: str | None = None
    macs: Mapping[str, str] | None = None  # NIC name (Redfish id, e.g. NIC.Integrated.1-1-1) → MAC
    serial: str | None = None
    service_tag: str | None = None
    model: str | None = None
    redfish_system_id: str | None = None  # the BMC's ComputerSystem id (System.Embedded.1): MAAS's power node_id
    bios_version: str | None = None
    bmc_firmware: str | None = None
    bmc_mac: str | None = None
    maas_system_id: str | None = None
    os_address: str | None = None
    hca_guids: tuple[str, ...] | None = None  # port/node GUIDs of the InfiniBand HCAs
    updated_at: float | None = None
    updated_by: str | None = None  # the command that last wrote any of them

    def known(self) -> dict[str, Any]:
        """The facts that are set, by name (macs as a plain dict, hca_guids as a list): JSON-ready."""
        out: dict[str, Any] = {}
        for name in FACT_NAMES:
            value = getattr(self, name)
            if value is not None:
                out[name] = dict(value) if name == "macs" else list(value) if name == "hca_guids" else value
        return out

    def merged(self, updates: Mapping[str, Any], *, command: str, at: float) -> HostFacts:
        """These facts with the given ones replaced (None clears one); the others are kept."""
        return replace(self, **typed(normalise_facts(updates)), updated_at=at, updated_by=command)


def _fail(name: str, value: Any, what: str) -> StateError:
    return StateError(f"host fact {name}: {value!r} is not {what}")


def normalise_mac(name: str, value: Any) -> str:
    """The MAC fact `name` in its stored form (`provision.state.identifiers.nic_mac`)."""
    mac = nic_mac(value)
    if mac is None:
        raise _fail(name, value, "a NIC's MAC address (12 hex digits, unicast, not zero)")
    return mac


def normalise_guid(name: str, value: Any) -> str:
    """A GUID fact in its stored form, `0x` and 16 hex digits (`provision.state.identifiers.canonical_guid`)."""
    guid = canonical_guid(value)
    if guid is None:
        raise _fail(name, value, "an InfiniBand GUID (up to 16 hex digits)")
    return guid_0x(guid)


def normalise_address(name: str, value: Any) -> str:
    """An IP address as `ipaddress` writes it, or a DNS name (RFC 1123 labels), lower-case."""
    if not isinstance(value, str):
        raise _fail(name, value, "an IP address or a host name")
    text = value.strip().lower().removesuffix(".")
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    labels = text.split(".")
    if len(text) > 253 or not all(_LABEL.match(label) for label in labels) or labels[-1].isdigit():
        raise _fail(name, value, "an IP address or a host name")
    return text


def normalise_text(name: str, value: Any) -> str:
    text = value.strip() if isinstance(value, str) else ""
    if not _TEXT.match(text):
        raise _fail(name, value, "a printable text of 1 to 128 characters")
    return text


def normalise_fact(name: str, value: Any) -> Any:
    """One fact's value in its stored form (None stays None: it clears the fact)."""
    if value is None:
        return None
    if name in TEXT_FACTS:
        return normalise_text(name, value)
    if name in MAC_FACTS:
        return normalise_mac(name, value)
    if name == "os_address":
        return normalise_address(name, value)
    if name == "macs":
        if not isinstance(value, Mapping):
            raise _fail(name, value, "a mapping of NIC name to MAC address")
        return {normalise_text(f"{name} NIC name", nic): normalise_mac(f"{name}[{nic}]", mac)
                for nic, mac in sorted(value.items())}
    if name == "hca_guids":
        if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
            raise _fail(name, value, "a list of InfiniBand GUIDs")
        return list(dict.fromkeys(normalise_guid(f"{name}[{i}]", guid) for i, guid in enumerate(value)))
    raise StateError(f"unknown host fact {name!r} (facts: {', '.join(FACT_NAMES)})")


def normalise_facts(updates: Mapping[str, Any]) -> dict[str, Any]:
    """Every given fact in its stored form (JSON-ready); raises StateError naming the first bad one."""
    return {name: normalise_fact(name, value) for name, value in updates.items()}


def typed(stored: Mapping[str, Any]) -> dict[str, Any]:
    """Stored (JSON-ready) facts as `HostFacts` holds them: macs read-only, hca_guids a tuple."""
    out = dict(stored)
    if out.get("macs") is not None:
        out["macs"] = MappingProxyType(dict(out["macs"]))
    if out.get("hca_guids") is not None:
        out["hca_guids"] = tuple(out["hca_guids"])
    return out


def facts_from_inventory(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The host facts in a harvest's `HostInventory.summary()`, by fact name, unchecked.

    Only what the harvest saw: a fact it did not see (None) is left out, so it does not clear one
    learnt before; NICs without a MAC are left out of `macs`. The summary's `system_id` is the Redfish
    ComputerSystem's id (`System.Embedded.1`), not MAAS's: it is `redfish_system_id`. The harvest does not read the
    BMC's own MAC or the HCAs' GUIDs.
    """
    out = {name: summary[name] for name in ("pxe_nic", "pxe_mac", "serial", "service_tag", "model",
                                             "bios_version", "bmc_firmware") if summary.get(name) is not None}
    if summary.get("system_id") is not None:
        out["redfish_system_id"] = summary["system_id"]
    macs = summary.get("macs")
    if isinstance(macs, Mapping):
        out["macs"] = {nic: mac for nic, mac in macs.items() if mac is not None}
    return out
