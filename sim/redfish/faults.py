"""Fault injection: which simulated BMC misbehaves, and how. Loaded from YAML, never from site facts.

The file maps host names to a list of fault names:

    faults:
      gpu-r2-03: [wrong_password]
      gpu-r2-05: [http_503]
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import yaml


class Fault(StrEnum):
    wrong_password = "wrong_password"  # the BMC's password is not the one the site's credential holds
    http_503 = "http_503"  # every request answers 503 Service Unavailable (iDRAC busy)
    hang = "hang"  # requests are read but never answered
    slow = "slow"  # every answer takes the configured extra delay
    tls_error = "tls_error"  # the TLS handshake is answered with a handshake_failure alert
    unreachable = "unreachable"  # nothing listens on the BMC's address (connection refused)
    no_pxe_nic = "no_pxe_nic"  # the PXE NIC is absent and the BIOS enables no PXE device
    pxe_link_down = "pxe_link_down"  # the PXE NIC reports LinkDown
    # the PXE NIC is a virtual NIC (as a Cisco VIC's vNICs): only its adapter's NetworkDeviceFunction carries its
    # MAC, the system's EthernetInterfaces leave it out
    pxe_nic_virtual = "pxe_nic_virtual"
    missing_gpu = "missing_gpu"  # one GPU less in the inventory than the host class expects
    power_fault = "power_fault"  # resets are accepted but the server never powers on


class FaultFileError(ValueError):
    pass


def parse_faults(text: str, source: str = "faults") -> dict[str, frozenset[Fault]]:
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise FaultFileError(f"{source}: expected a mapping with a 'faults' key")
    raw = data.get("faults", {}) or {}
    if not isinstance(raw, dict):
        raise FaultFileError(f"{source}: 'faults' must map host names to lists of fault names")
    out: dict[str, frozenset[Fault]] = {}
    names = ", ".join(f.value for f in Fault)
    for host, faults in raw.items():
        items = [faults] if isinstance(faults, str) else faults
        if not isinstance(items, list):
            raise FaultFileError(f"{source}: {host}: expected a list of fault names")
        try:
            out[str(host)] = frozenset(Fault(str(f)) for f in items)
        except ValueError as exc:
            raise FaultFileError(f"{source}: {host}: {exc} (known: {names})") from None
    return out


def load_faults(path: Path | None) -> dict[str, frozenset[Fault]]:
    if path is None or not path.exists():
        return {}
    return parse_faults(path.read_text(encoding="utf-8"), str(path))
