"""`fabric ports`: port health from UFM events, port counters and link state.

`plan` needs no site: it reads files a user saved (ibnetdiscover, UFM event.log or its REST JSON,
perfquery/ibqueryerrors sweeps, iblinkinfo) and prints what it would disable or watch. `apply --site S`
plans from the site's fabric now and disables the links (dry run unless --apply), `reenable LINK
--repaired` brings a repaired link back, `list` and `ticket` read the port ledger. Exit codes are every
command's (provision/command/exits.py): an error is one readable line on stderr and exit code 1.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from fabric.captures import read_capture
from fabric.design import load_design
from fabric.findings import Finding
from fabric.options import JsonOpt
from fabric.parsers.iblinkinfo import parse_iblinkinfo
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from fabric.ports.counters import CounterSweep, parse_counters
from fabric.ports.inputs import burnin_evidence, parse_duration, parse_now, read_events, read_resets, zone
from fabric.ports.linkstate import findings_from_iblinkinfo
from fabric.ports.plan import plan_ports
from fabric.ports.render import plan_text, plan_to_dict
from fabric.topology import End, Topology, merge
from fabric.ufm.resources import UfmPort, parse_link_cables, parse_ufm_ports
from provision.site.port_policy import PortPolicy

ports_app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


@ports_app.callback()
def _group() -> None:
    """Port health: plan which links to disable or watch, apply it, list, ticket and re-enable them."""


def _sweep(path: Path) -> CounterSweep:
    sweep = parse_counters(read_capture(path, "--counters"), str(path))
    if sweep.taken_at is None:  # no `date -Is` line first: the file's own time
        taken = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        sweep = CounterSweep(sweep.source, taken, sweep.values, sweep.by_lid, sweep.complete, sweep.rejected)
    return sweep


def _topology(paths: list[Path]) -> Topology:
    return merge(parse_ibnetdiscover(read_capture(p, "--discovered"), str(p)) for p in paths)


def _ufm_ports(ports: Path | None, links: Path | None) -> dict[End, UfmPort]:
    out: dict[End, UfmPort] = {}
    if links is not None:
        out.update(parse_link_cables(read_capture(links, "--ufm-links"), str(links)).ports)
    if ports is not None:
        out.update(parse_ufm_ports(read_capture(ports, "--ufm-ports"), str(ports)).ports)
    return out


def _findings(iblinkinfo: Path | None) -> tuple[Finding, ...]:
    if iblinkinfo is None:
        return ()
    return findings_from_iblinkinfo(parse_iblinkinfo(read_capture(iblinkinfo, "--iblinkinfo"), str(iblinkinfo)))


@ports_app.command("plan")
def plan(
    discovered: Annotated[list[Path], typer.Option("--discovered", help="ibnetdiscover output (repeatable).")],
    events: Annotated[list[Path] | None, typer.Option(
        "--events", help="UFM event.log, its syslog form, or /ufmRest/app/events JSON (repeatable).")] = None,
    counters: Annotated[list[Path] | None, typer.Option(
        "--counters", help="perfquery or ibqueryerrors sweep; give two for a rate.")] = None,
    iblinkinfo: Annotated[Path | None, typer.Option("--iblinkinfo", help="iblinkinfo output.")] = None,
    ufm_ports: Annotated[Path | None, typer.Option("--ufm-ports", help="/ufmRest/resources/ports JSON.")] = None,
    ufm_links: Annotated[Path | None, typer.Option("--ufm-links", help="/ufmRest/resources/links JSON.")] = None,
    design: Annotated[Path | None, typer.Option("--design", help="Cabling design (names, locations).")] = None,
    burnin: Annotated[list[Path] | None, typer.Option(
        "--burnin", help="`fabric burnin judge --json` output: its failing links as evidence (repeatable).")] = None,
    since: Annotated[str | None, typer.Option("--since", help="Window, e.g. 24h (default: the policy's).")] = None,
    now: Annotated[str | None, typer.Option("--now", help="ISO time the window ends (default: now).")] = None,
    events_tz: Annotated[str, typer.Option("--events-tz", help="Zone of UFM's timestamps.")] = "UTC",
    resets: Annotated[list[Path] | None, typer.Option(
        "--resets", help="When hosts were reset or power-cycled: `<host> <ISO time>` a line, or JSON [{host, "
        "time}] (repeatable). A host link going down just after is its host restarting, not the cable.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Plan which links to disable (both ends) or watch, from saved captures; changes nothing. A host link
    that went down counts toward disabling unless every HCA of the host went down together or `--resets`
    says the host was restarting (there is no state store to ask here)."""
    policy = PortPolicy(ufm_timezone=events_tz)
    window = parse_duration(since) if since else None
    topology = _topology(discovered)
    result = plan_ports(topology, read_events(events or [], zone(policy.ufm_timezone)),
                        [_sweep(p) for p in counters or []], _findings(iblinkinfo), policy, parse_now(now),
                        load_design(design) if design else None, since=window,
                        ufm_ports=_ufm_ports(ufm_ports, ufm_links), evidence=burnin_evidence(burnin or []),
                        restarts=read_resets(resets or []), restarts_from="--resets")
    if json_out:
        sys.stdout.write(json.dumps(plan_to_dict(result), indent=2) + "\n")
    else:
        sys.stdout.write(plan_text(result))


def _register_ledger_commands() -> None:
    from fabric.ports.cli_apply import apply_command, reenable_command
    from fabric.ports.cli_ledger import list_links, ticket

    ports_app.command("apply")(apply_command)
    ports_app.command("reenable")(reenable_command)
    ports_app.command("list")(list_links)
    ports_app.command("ticket")(ticket)


_register_ledger_commands()
