"""What `fabric topology` is given besides the discovered fabric: which HCA is whose, and which links to leave out.

Pure over the rows the state store holds: `host_map` names each CA that is a host's HCA (by the design's
identification, else by its node description `<host> <hca>`; factory descriptions and names that are not
plain hostnames are left out, with a warning that shows them escaped); `ledger_exclusions` takes the port
ledger's links out of service, `burnin_exclusions` the links whose latest burn-in verdict is fail.
`read_exclusions` reads both tables from a store, `design_hcas` turns an identification into host HCAs, and
`load_slurm_topology` gathers all of it for `fabric topology` (captures or live discovery, site, design, store).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from fabric.burnin.history import History, LinkRow
from fabric.burnin.judge import FAIL
from fabric.design import Design
from fabric.identify import Identification, ca_name_from_description
from fabric.ports.ledger import OUT_OF_SERVICE, Ledger, LedgerEntry
from fabric.topology import End, NodeType, Topology
from provision.state import StateStore
from provision.state.identifiers import canonical_guid

LinkKey = frozenset[End]
_HOSTNAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252}[A-Za-z0-9])?$")
_ENDTEXT = re.compile(r"^(?:0x)?([0-9a-fA-F]{1,16})\[(\d+)\]$")
_FACTORY_HCA = "Mellanox Technologies"  # "MT4129 ConnectX7 Mellanox Technologies": no host set its name


class Hca(NamedTuple):
    host: str  # the Slurm node name
    name: str  # mlx5_0


@dataclass(frozen=True)
class HostMap:
    """HCA node GUID -> (host, HCA), and why the other CAs were left out."""

    hcas: Mapping[str, Hca]
    warnings: tuple[str, ...] = ()
    others: int = 0  # HCAs of hosts that are not the site's GPU hosts (controller, storage): left out, no warning


def host_map(top: Topology, design_hcas: Mapping[str, Hca] | None = None, wanted: Mapping[str, str] | None = None,
             pattern: str | None = None) -> HostMap:
    """Each CA that is a host's HCA: placed by the design (`design_hcas`, from identification) or named by its
    node description (`<host> <hca>`). `wanted`: short host name (lower case) -> Slurm node name (the site's
    hosts); `pattern`: a glob the node name must match."""
    out: dict[str, Hca] = {}
    bad: list[str] = []
    factory = foreign = 0
    for node in top.cas():
        if node.is_aggregation_node:
            continue
        hca = (design_hcas or {}).get(node.guid)
        if hca is None:
            if node.description.strip().endswith(_FACTORY_HCA):
                factory += 1
                continue
            label = ca_name_from_description(node.description)
            if label is None:
                continue
            host, _, name = label.partition("/")
            hca = Hca(host, escape(name, 40))
        if wanted is not None:
            node_name = wanted.get(hca.host.split(".")[0].lower())
            if node_name is None:
                foreign += 1
                continue
            hca = Hca(node_name, hca.name)
        if not _HOSTNAME.match(hca.host):
            bad.append(f'"{escape(node.description, 60)}"')
            continue
        if pattern is None or fnmatch.fnmatchcase(hca.host, pattern):
            out[node.guid] = hca
    warnings = []
    if bad:
        warnings.append(f"{len(bad)} HCA(s) whose node description names no valid host name left out: "
                        + ", ".join(bad[:3]) + (" ..." if len(bad) > 3 else ""))
    if factory:
        warnings.append(f"{factory} HCA(s) with the factory node description (no host name set) left out")
    return HostMap(out, tuple(warnings), foreign)


def parse_end(text: str) -> End | None:
    m = _ENDTEXT.match(text.strip())
    guid = canonical_guid(m.group(1)) if m else None
    return End(guid, int(m.group(2))) if m and guid else None


def ledger_exclusions(entries: Iterable[LedgerEntry]) -> dict[LinkKey, str]:
    """Links whose latest port-ledger row has them out of service -> why."""
    out: dict[LinkKey, str] = {}
    for e in entries:
        ends = [parse_end(f"{x.guid}[{x.port}]") for x in e.ends]
        if e.state in OUT_OF_SERVICE and len(ends) == 2 and None not in ends:
            out[frozenset(x for x in ends if x is not None)] = f"port ledger: {e.state} ({e.why})"
    return out


def burnin_exclusions(history: Mapping[str, Sequence[LinkRow]]) -> dict[LinkKey, str]:
    """Links whose latest burn-in verdict (either direction) is fail -> why."""
    out: dict[LinkKey, str] = {}
    for link, rows in history.items():
        if not rows:
            continue
        last = max(rows, key=lambda r: (r.at, r.run))
        tail, _, head = link.partition("->")
        a, b = parse_end(tail), parse_end(head)
        if last.verdict == FAIL and a is not None and b is not None:
            out[frozenset((a, b))] = f"burn-in run {last.run}: fail ({last.reason})"
    return out


def escape(text: str, limit: int = 160, quotes: bool = True) -> str:
    """Printable ASCII only: control characters (newlines, ESC) and, with `quotes`, quotes and backslashes as
    escapes (without: for a message whose quoted parts are escaped already)."""
    out = []
    for ch in text:
        o = ord(ch)
        if quotes and ch in '\\"':
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")
    s = "".join(out)
    return s if len(s) <= limit else s[:limit] + "..."


def read_exclusions(store: StateStore) -> dict[LinkKey, str]:
    """The port ledger's links out of service and the burn-in's failed links, from the site's state store."""
    out = burnin_exclusions(History(store).link_history())
    out.update(ledger_exclusions(Ledger(store).current().values()))
    return out


def design_hcas(design: Design, ident: Identification) -> dict[str, Hca]:
    """CA GUID -> (host, HCA) for every CA the identification placed on a designed host HCA."""
    out: dict[str, Hca] = {}
    for guid, placed in ident.by_guid.items():
        node = design.nodes.get(placed.name)
        if node is not None and node.type is not NodeType.SWITCH and node.host and node.hca:
            out[guid] = Hca(node.host, node.hca)
    return out
