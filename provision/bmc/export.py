"""Exports of harvested MACs: CSV (one row per host, for spreadsheets and MAAS bulk add), YAML (per
host: PXE MAC, every MAC, BMC power parameters, for MAAS enlistment), and DHCP reservations of each
host's PXE NIC under its site host name, as ISC dhcpd `host` blocks and as dnsmasq `dhcp-host=` lines.

The reservations name hosts but fix no addresses: leases come from the PXE pool (MAAS's, or the one
`pxe_network.dhcp_range` describes), and a pool with `deny unknown-clients;` (dhcpd) or
`dhcp-ignore=tag:!known` (dnsmasq) then serves only the harvested hosts. Text that came from a BMC
(serials, NIC ids) only ever goes into comments, stripped to one printable line.
A PXE MAC that two hosts claim (two harvested hosts, or a host whose harvest failed `duplicate_pxe_mac`:
`contested`) is reserved for neither: the exports say so in a comment line instead, since DHCP would
hand one server the other's name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from provision.site import Site
from provision.site.endpoints import join_host_port
from provision.state.peer_text import csv_text

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
    return csv_text(CSV_COLUMNS, rows(site, inventories))


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
            "power": {"type": "redfish", "address": join_host_port(host.bmc.address, host.bmc.port),
                      "node_id": row["system_id"], "credential": host.bmc.credential},
        }
    # libyaml's emitter when present: the pure-Python one takes about a second for 500 hosts
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump({"site": site.name, "hosts": hosts}, Dumper=dumper, sort_keys=False)


_UNPRINTABLE = re.compile(r"[^\x20-\x7e]+")


def _comment(text: str) -> str:
    return _UNPRINTABLE.sub(" ", text).strip()


def _reservations(site: Site, inventories: Mapping[str, Mapping[str, Any]],
                  contested: Mapping[str, Sequence[str]]) -> tuple[list[tuple[dict[str, Any], str]], list[str]]:
    """(row, comment) for every harvested host with a PXE MAC no other host claims, in site order; and a
    line for each MAC refused because several hosts claim it."""
    claims: dict[str, list[str]] = {mac: list(hosts) for mac, hosts in contested.items()}
    for row in rows(site, inventories):
        if row["pxe_mac"]:
            claims.setdefault(row["pxe_mac"], []).append(row["hostname"])
    out, refused = [], []
    for row in rows(site, inventories):
        holders = sorted(set(claims.get(row["pxe_mac"]) or []))
        if len(holders) > 1:
            refused.append(_comment(f"REFUSED {row['pxe_mac']}: claimed by {', '.join(holders)} (duplicate_pxe_mac); "
                                    "no reservation for any of them until their BMCs are checked and re-harvested"))
        elif row["pxe_mac"]:
            note = f"rack {row['rack']}, serial {row['serial'] or '?'}, {row['pxe_nic'] or 'PXE NIC'}"
            out.append((row, _comment(note)))
    return out, sorted(set(refused))


def _header(site: Site, how_to_load: str, refused: Sequence[str]) -> list[str]:
    """The comment lines a reservations file starts with: what it is, how the DHCP server loads it, what was refused."""
    return [f"# DHCP reservations of site {site.name}: the PXE NIC of every harvested host (provision harvest-macs).",
            f"# {how_to_load}", *[f"# {line}" for line in refused]]


def to_dhcpd(site: Site, inventories: Mapping[str, Mapping[str, Any]],
             contested: Mapping[str, Sequence[str]] | None = None) -> str:
    """ISC dhcpd host declarations (include them from dhcpd.conf)."""
    reserved, refused = _reservations(site, inventories, contested or {})
    lines = [*_header(site, "Include from dhcpd.conf; with `deny unknown-clients;` in the PXE pool only these hosts "
                            "get leases.", refused), ""]
    for row, note in reserved:
        lines += [f"host {row['hostname']} {{  # {note}",
                  f"  hardware ethernet {row['pxe_mac']};",
                  f'  option host-name "{row["hostname"]}";',
                  "}"]
    return "\n".join(lines) + "\n"


def to_dnsmasq(site: Site, inventories: Mapping[str, Mapping[str, Any]],
               contested: Mapping[str, Sequence[str]] | None = None) -> str:
    """dnsmasq `dhcp-host=MAC,NAME` lines (a conf-file= or conf-dir= file)."""
    reserved, refused = _reservations(site, inventories, contested or {})
    lines = _header(site, "Load with conf-file=; `dhcp-ignore=tag:!known` then serves only these hosts.", refused)
    for row, note in reserved:
        lines += [f"# {row['hostname']}: {note}", f"dhcp-host={row['pxe_mac']},{row['hostname']}"]
    return "\n".join(lines) + "\n"


_RENDERERS = {"csv": to_csv, "yaml": to_yaml, "dhcpd": to_dhcpd, "dnsmasq": to_dnsmasq}
_DHCP = {"dhcpd": to_dhcpd, "dnsmasq": to_dnsmasq}


def default_paths(site: Site, state_dir: Path) -> dict[str, Path]:
    """Where the exports go unless told otherwise: in `state_dir` (the state store's), named after the site."""
    from provision.site.paths import export_files

    return export_files(state_dir, site.name)


def write_exports(site: Site, inventories: Mapping[str, Mapping[str, Any]], paths: Mapping[str, Path],
                  contested: Mapping[str, Sequence[str]] | None = None) -> None:
    """Write every export of `paths` (keys: csv, yaml, dhcpd, dnsmasq) from the harvested inventories;
    `contested`: PXE MACs that hosts not in `inventories` also claim (the DHCP exports reserve them for none)."""
    for name, path in paths.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        dhcp = name in ("dhcpd", "dnsmasq")
        text = _DHCP[name](site, inventories, contested) if dhcp else _RENDERERS[name](site, inventories)
        path.write_text(text, encoding="utf-8")
