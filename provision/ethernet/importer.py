"""The Ethernet design's NIC placements from the datacenter's workbook or CSV (read by `provision.site.sheets`:
header found under a title block, `--columns` for the partner's headers, merged cells filled, blank rows skipped).

One row per host, columns (matched loosely): host; bmc switch, bmc port; pxe switch, pxe port; optional
bmc mac, pxe mac, bmc vlan, pxe vlan. The switches come from an existing design file (`switches:`): a row
naming a switch it does not declare, a host twice, a blank host or a row with neither NIC is reported with
its sheet, row and why, and the import fails - nothing is dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from provision.ethernet.design import EthernetDesign, EthernetDesignError, design_problems
from provision.site.sheets import SheetRow, read_table
from provision.state.identifiers import canonical_mac

NIC_FIELDS = ("host", "bmc_switch", "bmc_port", "pxe_switch", "pxe_port", "bmc_mac", "pxe_mac", "bmc_vlan",
              "pxe_vlan")
ALIASES: dict[str, set[str]] = {
    "host": {"host", "hostname", "server", "node", "device"},
    "bmc_switch": {"bmc switch", "idrac switch", "ipmi switch", "oob switch", "mgmt switch"},
    "bmc_port": {"bmc port", "idrac port", "ipmi port", "oob port", "mgmt port"},
    "pxe_switch": {"pxe switch", "provisioning switch", "data switch", "nic switch"},
    "pxe_port": {"pxe port", "provisioning port", "data port", "nic port"},
    "bmc_mac": {"bmc mac", "idrac mac", "ipmi mac"},
    "pxe_mac": {"pxe mac", "nic mac", "provisioning mac"},
    "bmc_vlan": {"bmc vlan", "oob vlan"},
    "pxe_vlan": {"pxe vlan", "provisioning vlan"},
}


def _placement(row: SheetRow, role: str, switches: set[str]) -> tuple[dict[str, Any] | None, str | None]:
    f = row.fields
    switch, port = f.get(f"{role}_switch", ""), f.get(f"{role}_port", "")
    if not switch and not port:
        return None, None
    if not switch or not port:
        return None, f"{role.upper()} needs both a switch and a port (got {switch!r}, {port!r})"
    if switch not in switches:
        return None, f"{role.upper()} switch {switch!r} is not declared (switches: {', '.join(sorted(switches))})"
    out: dict[str, Any] = {"switch": switch, "port": port}
    mac, vlan = f.get(f"{role}_mac", ""), f.get(f"{role}_vlan", "")
    if mac:
        canonical = canonical_mac(mac)
        if canonical is None:
            return None, f"{role.upper()} MAC {mac!r} is not a MAC address"
        out["mac"] = canonical
    if vlan:
        if not vlan.isdigit() or not 1 <= int(vlan) <= 4094:
            return None, f"{role.upper()} VLAN {vlan!r} is not 1-4094"
        out["vlan"] = int(vlan)
    return out, None


def import_nics(path: Path, base: EthernetDesign, columns: dict[str, str] | None = None,
                sheet: str | None = None) -> EthernetDesign:
    """`base`'s switches with the sheet's NIC placements."""
    table = read_table(path, ALIASES, ("host",), columns, sheet)
    problems: list[str] = []
    nics: dict[str, dict[str, Any]] = {}
    for row in table.rows:
        host = row.fields.get("host", "")
        why = "blank host" if not host else f"{host} appears twice" if host in nics else None
        placed: dict[str, Any] = {}
        for role in ("bmc", "pxe"):
            p, bad = _placement(row, role, set(base.switches))
            why = why or bad
            if p is not None:
                placed[role] = p
        why = why or (None if placed else "neither a BMC nor a PXE switch port")
        if why:
            problems.append(f"{row.where()}: {why}")
        else:
            nics[host] = placed
    if problems:
        head = f"{path}: {len(problems)} row(s) not understood"
        raise EthernetDesignError("\n  ".join([head, *problems, *table.skipped]))
    design = EthernetDesign.model_validate({"switches": base.model_dump()["switches"], "nics": nics})
    if clash := design_problems(design):  # two hosts' NICs on one port
        raise EthernetDesignError("\n  ".join([f"{path}: the rows put two NICs on one port", *clash]))
    return design
