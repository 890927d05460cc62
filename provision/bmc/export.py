"""Exports of harvested MACs: CSV (one row per host, for spreadsheets and MAAS bulk add) and YAML
(per host: PXE MAC, every MAC, BMC power parameters, for MAAS enlistment and DHCP reservations)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

import yaml

from provision.site import Site

CSV_COLUMNS = ("hostname", "rack", "serial", "service_tag", "model", "pxe_nic", "pxe_mac", "all_macs",
               "bmc_address", "bmc_port", "system_id")


def rows(site: Site, inventories: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for host in site.hosts():
        inv = inventories.get(host.hostname)
        if not inv:
            continue
        macs = inv.get("macs") or {}
        out.append({
            "hostname": host.hostname, "rack": host.rack, "serial": inv.get("serial") or "",
            "service_tag": inv.get("service_tag") or "", "model": inv.get("model") or "",
            "pxe_nic": inv.get("pxe_nic") or "", "pxe_mac": inv.get("pxe_mac") or "",
            "all_macs": " ".join(f"{k}={v}" for k, v in sorted(macs.items()) if v),
            "bmc_address": host.bmc.address, "bmc_port": host.bmc.port, "system_id": inv.get("system_id") or "",
        })
    return out


def to_csv(site: Site, inventories: Mapping[str, Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows(site, inventories))
    return buf.getvalue()


def to_yaml(site: Site, inventories: Mapping[str, Mapping[str, Any]]) -> str:
    hosts: dict[str, Any] = {}
    for row, host in ((r, site.host(r["hostname"])) for r in rows(site, inventories)):
        assert host is not None
        inv = inventories[row["hostname"]]
        hosts[row["hostname"]] = {
            "pxe_mac": row["pxe_mac"],
            "pxe_nic": row["pxe_nic"],
            "mac_addresses": sorted({m for m in (inv.get("macs") or {}).values() if m}),
            "serial": row["serial"],
            "service_tag": row["service_tag"],
            "power": {"type": "redfish", "address": f"{host.bmc.address}:{host.bmc.port}",
                      "node_id": row["system_id"], "credential": host.bmc.credential},
        }
    # libyaml's emitter when present: the pure-Python one takes about a second for 500 hosts
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump({"site": site.name, "hosts": hosts}, Dumper=dumper, sort_keys=False)
