"""Hosts follow their ports: the `ports` lifecycle step (provision/steps/pipeline.py `PORTS`).

A host one of whose HCA links the port ledger has down (the link `disabled` or `reenable_refused`, an apply
that stopped after disabling one of its ends, or a change in flight: `planned`, `reenabling`) moves to
`failed(ib_port_disabled)`, whatever it was, golden included; the evidence names each link, its ledger row id
and why it is down. A host failed that way whose links are all back (`reenabled`, or never down after all)
goes back to `configured`, so that health and burn-in must earn golden again: `configured` is the state
`provision health` takes hosts from, and the lifecycle lets a failed host re-enter at most one step past where
it failed (a host that failed before it was configured goes back to the state it failed in). Nothing else is
moved: a host whose links are fine is skipped, and a host whose links are still down stays failed.

`fabric ports apply --apply` and `fabric ports reenable` run this step after they change the ledger.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fabric.identify import ca_name_from_description
from fabric.ports.ledger import (
    APPLY_FAILED,
    DISABLED,
    JOB_TIMEOUT,
    PLANNED,
    REENABLE_REFUSED,
    REENABLING,
    LedgerEnd,
    LedgerEntry,
)
from provision.site.model import Host, Site
from provision.state import HostRecord, State, StateStore
from provision.state.facts import HostFacts
from provision.state.identifiers import canonical_guid
from provision.state.lifecycle import RANK
from provision.steps.pipeline import PORTS
from provision.steps.runner import HostFailure, HostResult, Recording, Step, run_step

REASON = "ib_port_disabled"
COMMAND = "fabric ports"


def link_is_down(entry: LedgerEntry) -> bool:
    """The link carries no traffic, or is not known to: disabled (or refused on re-enable), an apply that disabled
    an end of it before it stopped (or before a UFM job timed out), or a change in flight (`planned`,
    `reenabling`: a host behind a change being made, or whose run was cut short, is never golden). An apply
    that failed before touching anything leaves the link as it was."""
    if entry.state in (DISABLED, REENABLE_REFUSED, PLANNED, REENABLING):
        return True
    if entry.state in (APPLY_FAILED, JOB_TIMEOUT):
        return any((e.done or "").startswith(("disabled", "already disabled")) for e in entry.ends)
    return False


def end_host(end: LedgerEnd, guid_hosts: Mapping[str, str]) -> str | None:
    """The host an HCA end belongs to: by HCA GUID (host facts), else by its name (`gpu-r1-01/mlx5_0` from
    the design, `gpu-r1-01 mlx5_0` from the node description)."""
    if end.is_switch:
        return None
    if end.guid in guid_hosts:
        return guid_hosts[end.guid]
    if "/" in end.name:
        return end.name.split("/", 1)[0]
    label = ca_name_from_description(end.name)
    return label.split("/", 1)[0] if label else None


def down_links_by_host(current: Iterable[LedgerEntry], guid_hosts: Mapping[str, str]) -> dict[str, list[LedgerEntry]]:
    out: dict[str, list[LedgerEntry]] = {}
    for entry in current:
        if not link_is_down(entry):
            continue
        for end in entry.ends:
            host = end_host(end, guid_hosts)
            if host is not None and entry not in out.get(host, []):
                out.setdefault(host, []).append(entry)
    return out


def guid_hosts(store: StateStore, hosts: Iterable[str]) -> dict[str, str]:
    """HCA GUID -> host, from the hosts' facts where they were learnt."""
    out: dict[str, str] = {}
    facts: dict[str, HostFacts] = store.facts_many(hosts)
    for name, known in facts.items():
        for guid in known.hca_guids or ():
            out[canonical_guid(guid) or guid] = name
    return out


def _link_evidence(entry: LedgerEntry) -> dict[str, Any]:
    return {"link": entry.link, "ledger_id": entry.id, "state": entry.state, "why": entry.why,
            "ends": [f"{e.name}[{e.port}]" for e in entry.ends]}


class PortsStep(Step):
    spec = PORTS

    def __init__(self, store: StateStore, current: Iterable[LedgerEntry], hosts: Iterable[str]) -> None:
        self.store = store
        self.current = {e.link: e for e in current}
        self.down = down_links_by_host(self.current.values(), guid_hosts(store, hosts))

    @property
    def command(self) -> str:
        return COMMAND

    def skip_reason(self, record: HostRecord) -> str | None:
        down = self.down.get(record.hostname)
        if record.state is State.failed and record.reason == REASON:
            if down:
                return f"still failed: {', '.join(e.link for e in down)} still out of service"
            return None
        if not down:
            return "no HCA link of this host is out of service"
        if record.state is State.failed or record.state in self.spec.takes:
            return None
        return f"{record.state.value}: not deployed yet (a later `fabric ports` run fails it if its link is down)"

    async def work(self, host: Host, rec: Recording) -> dict[str, Any]:
        down = self.down.get(host.hostname)
        if down:
            links = "; ".join(f"{' <-> '.join(f'{e.name}[{e.port}]' for e in x.ends)} (ledger {x.link} "
                              f"{f'row {x.id}' if x.id is not None else 'now'}: {x.state}, {x.why})" for x in down)
            raise HostFailure(REASON, f"HCA link out of service: {links}",
                              {"links": [_link_evidence(x) for x in down]})
        record = self.store.get(host.hostname) if self.store is not None else None
        resume = record.resume_from if record is not None else None
        target = State.configured if resume is None or RANK[resume] >= RANK[State.configured] else resume
        was = record.evidence.get("links", []) if record is not None and isinstance(record.evidence, dict) else []
        back = [_link_evidence(self.current[x["link"]]) for x in was if x.get("link") in self.current]
        outcome = await rec.move(host.hostname, target, {"reenabled": back, "detail": "its HCA links carry "
                                 "traffic again: health and burn-in earn golden again"})
        return {"changed": outcome.changed, "to": target.value}


async def hosts_follow(site: Site, store: StateStore, current: Sequence[LedgerEntry]) -> list[HostResult]:
    """Run the `ports` step over the site's hosts: fail those behind a down link, send repaired ones back."""
    store.sync_site((h.hostname, h.rack) for h in site.hosts())
    hosts = [h for h in site.hosts() if h.role == "gpu"]
    step = PortsStep(store, current, [h.hostname for h in hosts])
    return [r for r in await run_step(step, store, hosts, step.limits()) if not r.skipped]
