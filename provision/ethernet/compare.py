"""Locate every designed NIC's MAC on the switches and compare with the design.

Statuses (one per NIC): ok, wrong_port (with `swap_with` when two hosts' cables are crossed),
seen_twice, not_seen (the designed port's state says which: `unplugged` when it has no link,
`err_disabled`, `admin_down`, or link up but the MAC not learnt: dead NIC or wrong VLAN), wrong_vlan,
err_disabled (seen, but the port is error-disabled now), unknown (the designed switch could not be
read and the MAC was seen nowhere else).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from provision.ethernet.design import EthernetDesign, NicPlacement, normalise_port
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

    def to_json(self) -> dict[str, object]:
        return asdict(self)


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


def _unseen(r: NicResult, p: NicPlacement, view: SwitchView | None) -> None:
    where = _where(p.switch, p.port)
    if view is None or view.state != "ok":
        r.status, r.reason = "unknown", f"switch {p.switch} could not be read: {view.reason if view else 'absent'}"
        r.fix = f"make {p.switch} answer, then check again"
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
        r.fix = f"put {where} in VLAN {p.vlan}"
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
        r.reason = f"seen on {_where(str(s['switch']), str(s['port']))}, designed {_where(p.switch, p.port)}"
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


def _pair_swaps(results: list[NicResult]) -> None:
    """Two NICs each on the other's designed port: one finding each, 'swap these two cables'."""
    designed = {(r.designed["switch"], normalise_port(r.designed["port"])): r for r in results}
    for r in results:
        if r.status != "wrong_port" or r.swap_with:
            continue
        s = r.seen[0]
        other = designed.get((str(s["switch"]), normalise_port(str(s["port"]))))
        if other is None or other.status != "wrong_port":
            continue
        o = other.seen[0]
        if (str(o["switch"]), normalise_port(str(o["port"]))) == (r.designed["switch"],
                                                                   normalise_port(r.designed["port"])):
            for a, b in ((r, other), (other, r)):
                a.swap_with = f"{b.host} {b.role}"
                a.fix = (f"swap these two cables: {_where(a.designed['switch'], a.designed['port'])} "
                         f"({a.host} {a.role}) <-> {_where(b.designed['switch'], b.designed['port'])} "
                         f"({b.host} {b.role})")


def compare(design: EthernetDesign, views: dict[str, SwitchView], macs: dict[tuple[str, str], str]) -> list[NicResult]:
    """One result per designed NIC; `macs` (host, role) -> harvested MAC wins over the design's."""
    where = locate(views)
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
            if r.seen:
                _seen(r, p, views)
            else:
                _unseen(r, p, views.get(p.switch))
                if r.status != "unknown" and unread:
                    r.reason += f" (not read: {', '.join(unread)}; it may be plugged there)"
        results.append(r)
    _pair_swaps(results)
    return results
