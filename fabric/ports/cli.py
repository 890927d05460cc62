"""`fabric ports`: port health from UFM events, port counters and link state.

`plan` needs no site: it reads files a user saved (ibnetdiscover, UFM event.log or its REST JSON,
perfquery/ibqueryerrors sweeps, iblinkinfo) and prints what it would disable or watch. `apply --site S`
plans from the site's fabric now and disables the links (dry run unless --apply), `reenable LINK
--repaired` brings a repaired link back, `list` and `ticket` read the port ledger. Errors are one
readable line on stderr and exit code 1.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import typer

from fabric.design import load_design
from fabric.errors import FabricError
from fabric.findings import Finding
from fabric.parsers.iblinkinfo import parse_iblinkinfo
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from fabric.ports.counters import CounterSweep, parse_counters
from fabric.ports.evidence import Evidence
from fabric.ports.linkstate import findings_from_iblinkinfo
from fabric.ports.plan import plan_ports
from fabric.ports.render import plan_text, plan_to_dict
from fabric.topology import End, Topology, merge
from fabric.ufm.events import Rejected, UfmEvent, iter_event_log, parse_rest_events
from fabric.ufm.resources import UfmPort, parse_link_cables, parse_ufm_ports
from provision.site.bounded import MAX_CAPTURE_BYTES, InputRefused, read_bytes
from provision.site.port_policy import PortPolicy

EXIT_ERROR = 1
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}

ports_app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


@ports_app.callback()
def _group() -> None:
    """Port health: plan which links to disable or watch, apply it, list, ticket and re-enable them."""


class PortsInputError(FabricError):
    """An option or input file of `fabric ports` that cannot be used."""


def parse_duration(text: str) -> timedelta:
    m = _DURATION.match(text.strip())
    if m is None:
        raise PortsInputError(f"--since {text!r}: expected a duration such as 24h, 90m, 2d or 3600s")
    return timedelta(seconds=float(m.group(1)) * _UNIT_S[m.group(2)])


def parse_now(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise PortsInputError(f"--now {text!r}: expected an ISO time such as 2026-12-01T19:00:00Z") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _read(path: Path, what: str) -> str:
    try:
        return read_bytes(path, limit=MAX_CAPTURE_BYTES, what=what).decode("utf-8", errors="replace")
    except InputRefused as e:
        raise PortsInputError(str(e)) from None
    except OSError as e:
        raise PortsInputError(f"{what} {path}: {e.strerror or e}") from None


def _zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise PortsInputError(f"--events-tz {name!r}: not a time zone name (e.g. UTC, America/Los_Angeles)") from None


def _events(paths: list[Path], tz: tzinfo) -> Iterator[UfmEvent | Rejected]:
    for path in paths:
        try:
            with path.open(errors="replace") as f:
                head = f.read(1)
                while head.isspace():
                    head = f.read(1)
                f.seek(0)
                if head in ("[", "{"):
                    log = parse_rest_events(f.read(), str(path), tz)
                    yield from log.rejected
                    yield from log.events
                else:
                    yield from iter_event_log(f, str(path), tz)
        except OSError as e:
            raise PortsInputError(f"--events {path}: {e.strerror or e}") from None


def _sweep(path: Path) -> CounterSweep:
    sweep = parse_counters(_read(path, "--counters"), str(path))
    if sweep.taken_at is None:  # no `date -Is` line first: the file's own time
        taken = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        sweep = CounterSweep(sweep.source, taken, sweep.values, sweep.by_lid, sweep.complete, sweep.rejected)
    return sweep


def _topology(paths: list[Path]) -> Topology:
    return merge(parse_ibnetdiscover(_read(p, "--discovered"), str(p)) for p in paths)


def _ufm_ports(ports: Path | None, links: Path | None) -> dict[End, UfmPort]:
    out: dict[End, UfmPort] = {}
    if links is not None:
        out.update(parse_link_cables(_read(links, "--ufm-links"), str(links)).ports)
    if ports is not None:
        out.update(parse_ufm_ports(_read(ports, "--ufm-ports"), str(ports)).ports)
    return out


def burnin_evidence(paths: list[Path]) -> list[Evidence]:
    """The port-plan evidence of burn-in judgements (their `port_plan_evidence`)."""
    out: list[Evidence] = []
    for path in paths:
        try:
            doc = json.loads(_read(path, "--burnin"))
            items = doc["port_plan_evidence"] if isinstance(doc, dict) else None
            if not isinstance(items, list):
                raise ValueError("no port_plan_evidence list: expected `fabric burnin judge --json` output")
            out.extend(Evidence.from_dict(item, f"{path}: port_plan_evidence[{i}]") for i, item in enumerate(items))
        except ValueError as e:
            raise PortsInputError(f"--burnin {path}: {e}") from None
    return out


def _findings(iblinkinfo: Path | None) -> tuple[Finding, ...]:
    if iblinkinfo is None:
        return ()
    return findings_from_iblinkinfo(parse_iblinkinfo(_read(iblinkinfo, "--iblinkinfo"), str(iblinkinfo)))


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
    json_out: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
) -> None:
    """Plan which links to disable (both ends) or watch, from saved captures; changes nothing."""
    try:
        policy = PortPolicy(ufm_timezone=events_tz)
        window = parse_duration(since) if since else None
        topology = _topology(discovered)
        result = plan_ports(topology, _events(events or [], _zone(policy.ufm_timezone)),
                            [_sweep(p) for p in counters or []], _findings(iblinkinfo), policy, parse_now(now),
                            load_design(design) if design else None, since=window,
                            ufm_ports=_ufm_ports(ufm_ports, ufm_links), evidence=burnin_evidence(burnin or []))
    except FabricError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(EXIT_ERROR) from None
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
