"""Locate every designed NIC's MAC on the switches and compare with the design.

Statuses (one per NIC): ok, wrong_port (with `swap_with` when two hosts' cables are crossed),
seen_twice, not_seen (the designed port's state says which: `unplugged` when it has no link,
`err_disabled`, `admin_down`, or link up but the MAC not learnt: dead NIC or wrong VLAN), wrong_vlan,
err_disabled (seen, but the port is error-disabled now), unknown (the designed switch could not be
read and the MAC was seen nowhere else).

LLDP is the second witness: a host's NIC that speaks LLDP is heard on the port its cable is in, by its
hostname (or its MAC as chassis id) and interface name, even when the port learns no MAC from it. So a
NIC whose MAC is nowhere but whom LLDP hears on another port is `wrong_port` (the fix: move that cable);
one heard on its designed port with no MAC learnt is `not_seen` with "LLDP sees <host> <if>, no MAC
learnt: wrong VLAN or the NIC is not sending"; and a wrong_port reason names what LLDP hears on the
designed port (the host whose cable is there instead).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from provision.ethernet.design import EthernetDesign, NicPlacement, normalise_port
from provision.ethernet.names import TRUNCATED, advertised_names, goes_by, neighbour_names, truncated_prefixes
from provision.ethernet.parse import LldpNeighbour
from provision.ethernet.switches import SwitchView


@dataclass
class NicResult:
    host: str
    role: str
    mac: str | None
    designed: dict[str, str]
    seen: list[dict[str, object]] = field(default_factory=list)
    status: str = "ok"
    reason: str = ""
    fix: str = ""
    swap_with: str | None = None
    lldp_designed: list[dict[str, str]] = field(default_factory=list)  # LLDP heard on the designed port
    lldp_seen: list[dict[str, str]] = field(default_factory=list)  # where LLDP hears this NIC
    lldp_others: list[str] = field(default_factory=list)  # the designed port's neighbours that are not this NIC

    def to_json(self) -> dict[str, object]:
        out = asdict(self)
        out.pop("lldp_others")
        return out


def _where(switch: str, port: str) -> str:
    return f"{switch} {port}"


def locate(views: dict[str, SwitchView]) -> dict[str, list[dict[str, object]]]:
    """MAC -> every (switch, port, vlan) it is learnt on, edge ports only (a port-channel is an uplink)."""
    seen: dict[str, list[dict[str, object]]] = {}
    for name, view in sorted(views.items()):
        for e in view.macs:
            if e.key.startswith(("po", "port-channel", "vpc", "sup-", "drop", "router", "cpu")):
                continue
            seen.setdefault(e.mac, []).append({"switch": name, "port": e.port, "vlan": e.vlan})
    return seen


_Heard = dict[str, list[tuple[str, LldpNeighbour]]]


def lldp_index(views: dict[str, SwitchView]) -> tuple[_Heard, _Heard]:
    """(chassis MAC -> [(switch, neighbour)], name -> [(switch, neighbour)]) over every switch read; a
    neighbour is indexed under each name it goes by (names.neighbour_names: system name, port description)."""
    by_mac: _Heard = {}
    by_host: _Heard = {}
    for name, v in sorted(views.items()):
        for neighbours in v.lldp.values():
            for n in neighbours:
                if n.chassis:
                    by_mac.setdefault(n.chassis, []).append((name, n))
                for known in neighbour_names(n):
                    by_host.setdefault(known, []).append((name, n))
                for prefix in truncated_prefixes(n):  # a cut system name: looked up by prefix (_by_name)
                    by_host.setdefault(prefix + TRUNCATED, []).append((name, n))
    return by_mac, by_host


def _lldp_of(r: NicResult, p: NicPlacement, views: dict[str, SwitchView], heard: tuple[_Heard, _Heard],
             names: frozenset[str]) -> None:
    """What LLDP hears on the designed port, and where it hears this NIC: its MAC as chassis id, or a name
    it is advertised under (`names`: the PXE NIC's host name, the BMC's own names; names.py)."""
    view = views.get(p.switch)
    here = view.lldp.get(normalise_port(p.port), []) if view else []
    r.lldp_designed = [{"name": n.name, "port_id": n.port_id, "chassis": n.chassis} for n in here]
    r.lldp_others = [f"{n.name} {n.port_id}" for n in here if n.chassis != r.mac and not goes_by(n, names)]
    found = heard[0].get(r.mac or "", []) + _by_name(heard[1], names)
    seen = {(sw, n.key): {"switch": sw, "port": n.port, "port_id": n.port_id} for sw, n in found}
    r.lldp_seen = [seen[k] for k in sorted(seen)]


def _by_name(by_host: _Heard, names: frozenset[str]) -> list[tuple[str, LldpNeighbour]]:
    """Every (switch, neighbour) going by one of `names`: exactly, or by a cut name they start with."""
    hits = [hit for name in sorted(names) for hit in by_host.get(name, [])]
    cut = [(k.removesuffix(TRUNCATED), v) for k, v in by_host.items() if k.endswith(TRUNCATED)]
    return hits + [hit for prefix, v in cut if any(name.startswith(prefix) for name in names) for hit in v]


def _heard(r: NicResult) -> str:
    """'; LLDP on the designed port hears gpu-r1-04 eno1' when someone else's NIC is cabled there."""
    others = r.lldp_others
    return f"; LLDP on {_where(r.designed['switch'], r.designed['port'])} hears {', '.join(others)}" if others else ""


def _at_design(s: dict[str, object] | dict[str, str], p: NicPlacement) -> bool:
    return (str(s["switch"]), normalise_port(str(s["port"]))) == (p.switch, normalise_port(p.port))


def _lldp_only(r: NicResult, p: NicPlacement) -> bool:
    """No MAC anywhere: LLDP heard elsewhere is wrong_port; heard on the design port, say so. True if decided."""
    elsewhere = [s for s in r.lldp_seen if not _at_design(s, p)]
    where = _where(p.switch, p.port)
    if elsewhere and not any(_at_design(s, p) for s in r.lldp_seen):
        s = elsewhere[0]
        r.status = "wrong_port"
        r.reason = (f"LLDP hears {r.host} {s['port_id']} on {_where(s['switch'], s['port'])} (no MAC learnt there), "
                    f"designed {where}" + _heard(r))
        r.fix = f"move the cable from {_where(s['switch'], s['port'])} to {where}"
        return True
    return False


def _unseen(r: NicResult, p: NicPlacement, view: SwitchView | None) -> None:
    where = _where(p.switch, p.port)
    if view is None or view.state != "ok":
        r.status, r.reason = "unknown", f"switch {p.switch} could not be read: {view.reason if view else 'absent'}"
        r.fix = f"make {p.switch} answer, then check again"
        return
    if _lldp_only(r, p):
        return
    port = view.ports.get(normalise_port(p.port))
    state = port.state if port else "absent"
    r.status = "not_seen"
    if state == "down":
        r.reason = f"unplugged: not seen on any switch; designed port {where} has no link ({port.raw if port else ''})"
        r.fix = f"plug {r.host}'s {r.role.upper()} NIC into {where} (reseat or replace the cable)"
    elif state == "err-disabled":
        r.status = "err_disabled"
        r.reason = f"designed port {where} is error-disabled ({port.raw if port else ''})"
        r.fix = f"find why {where} was error-disabled (BPDU guard, flapping), fix it, then shut/no shut the port"
    elif state == "admin-down":
        r.reason = f"designed port {where} is administratively disabled"
        r.fix = f"enable {where} (no shutdown)"
    elif state == "absent":
        r.reason = f"designed port {where} does not exist on {p.switch}"
        r.fix = f"correct the design's port for {r.host} {r.role}"
    elif p.vlan is not None and port is not None and port.vlan.isdigit() and int(port.vlan) != p.vlan:
        r.status = "wrong_vlan"
        r.reason = f"link up on {where} but the port is in VLAN {port.vlan}, designed {p.vlan}; MAC not learnt"
        r.reason += "; LLDP sees the NIC there" if any(_at_design(s, p) for s in r.lldp_seen) else ""
        r.fix = f"put {where} in VLAN {p.vlan}"
    elif heard := [s for s in r.lldp_seen if _at_design(s, p)]:
        r.reason = (f"link up on {where}, LLDP sees {r.host} {heard[0]['port_id']}, no MAC learnt: "
                    "wrong VLAN or the NIC is not sending")
        vlan = p.vlan or (port.vlan if port else "?")
        r.fix = (f"check which VLAN {r.host}'s {r.role.upper()} NIC sends in ({where} expects VLAN {vlan}, "
                 "untagged) and that the NIC is enabled in the OS/firmware")
    elif r.lldp_designed:
        r.reason = f"link up on {where} but MAC {r.mac} not learnt" + _heard(r)
        r.fix = (f"the cable on {where} is another NIC's: find {r.host}'s {r.role.upper()} NIC cable "
                 f"and plug it into {where}")
    else:
        r.reason = f"link up on {where} but MAC {r.mac} not learnt: the NIC is dead or sends on another VLAN"
        r.fix = f"check {r.host}'s {r.role.upper()} NIC (is it the one cabled to {where}?) and the port's VLAN"


def _seen(r: NicResult, p: NicPlacement, views: dict[str, SwitchView]) -> None:
    key = (p.switch, normalise_port(p.port))
    at_design = [s for s in r.seen if (s["switch"], normalise_port(str(s["port"]))) == key]
    if len(r.seen) > 1:
        r.status = "seen_twice"
        r.reason = "seen on " + ", ".join(_where(str(s["switch"]), str(s["port"])) for s in r.seen)
        r.fix = "find the loop or the duplicate MAC: one NIC can be on one port only"
        return
    s = r.seen[0]
    if not at_design:
        r.status = "wrong_port"
        r.reason = (f"seen on {_where(str(s['switch']), str(s['port']))}, designed {_where(p.switch, p.port)}"
                    + _heard(r))
        r.fix = f"move the cable from {_where(str(s['switch']), str(s['port']))} to {_where(p.switch, p.port)}"
        return
    port = views[p.switch].ports.get(key[1])
    if port is not None and port.state == "err-disabled":
        r.status, r.reason = "err_disabled", f"{_where(p.switch, p.port)} is error-disabled ({port.raw})"
        r.fix = f"find why {_where(p.switch, p.port)} was error-disabled, fix it, then shut/no shut the port"
    elif p.vlan is not None and s["vlan"] is not None and s["vlan"] != p.vlan:
        r.status = "wrong_vlan"
        r.reason = f"learnt on {_where(p.switch, p.port)} in VLAN {s['vlan']}, designed {p.vlan}"
        r.fix = f"put {_where(p.switch, p.port)} in VLAN {p.vlan}"


def _found(r: NicResult) -> dict[str, object] | dict[str, str]:
    """Where a wrong_port NIC is: its MAC's port, else where LLDP hears it."""
    return r.seen[0] if r.seen else r.lldp_seen[0]


def _pair_swaps(results: list[NicResult]) -> None:
    """Two NICs each on the other's designed port: one finding each, 'swap these two cables'."""
    designed = {(r.designed["switch"], normalise_port(r.designed["port"])): r for r in results}
    for r in results:
        if r.status != "wrong_port" or r.swap_with:
            continue
        s = _found(r)
        other = designed.get((str(s["switch"]), normalise_port(str(s["port"]))))
        if other is None or other.status != "wrong_port":
            continue
        o = _found(other)
        if (str(o["switch"]), normalise_port(str(o["port"]))) == (r.designed["switch"],
                                                                   normalise_port(r.designed["port"])):
            for a, b in ((r, other), (other, r)):
                a.swap_with = f"{b.host} {b.role}"
                a.fix = (f"swap these two cables: {_where(a.designed['switch'], a.designed['port'])} "
                         f"({a.host} {a.role}) <-> {_where(b.designed['switch'], b.designed['port'])} "
                         f"({b.host} {b.role})")


def compare(design: EthernetDesign, views: dict[str, SwitchView], macs: dict[tuple[str, str], str],
            names: dict[tuple[str, str], frozenset[str]] | None = None) -> list[NicResult]:
    """One result per designed NIC; `macs` (host, role) -> harvested MAC wins over the design's; `names`
    (host, role) -> the names that NIC may be advertised under in LLDP (default: names.advertised_names)."""
    where = locate(views)
    heard = lldp_index(views)
    unread = sorted(n for n, v in views.items() if v.state != "ok")
    results = []
    for host, role, p in design.placements():
        mac = macs.get((host, role)) or p.mac
        r = NicResult(host, role, mac, {"switch": p.switch, "port": p.port})
        if mac is None:
            r.status, r.reason = "unknown", "no MAC known (harvest the BMC's MACs first)"
            r.fix = f"provision harvest-macs --hosts {host}"
        else:
            r.seen = where.get(mac, [])
            _lldp_of(r, p, views, heard, (names or {}).get((host, role)) or advertised_names(host, role))
            if r.seen:
                _seen(r, p, views)
            else:
                _unseen(r, p, views.get(p.switch))
                if r.status != "unknown" and unread:
                    r.reason += f" (not read: {', '.join(unread)}; it may be plugged there)"
        results.append(r)
    _pair_swaps(results)
    return results
