"""`fabric ports list` and `fabric ports ticket LINK`: what the port ledger says is out of service, and why.

Both read the site's state store (`--db`, else $BRINGUP_STATE_DB, else the site's default) and change nothing.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from fabric.errors import FabricError
from fabric.ports.ledger import OUT_OF_SERVICE, Ledger
from fabric.ports.ticket import entry_ticket
from provision.errors import BringupError
from provision.state import StateStore

DbOption = Annotated[Path, typer.Option("--db", envvar="BRINGUP_STATE_DB", help="The site's state database.")]


def _ledger(db: Path) -> Ledger:
    if not db.is_file():
        raise FabricError(f"{db}: no state database here (--db or $BRINGUP_STATE_DB)")
    return Ledger(StateStore(db))


def list_links(db: DbOption, all_: Annotated[bool, typer.Option("--all", help="Re-enabled links too.")] = False,
               json_out: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False) -> None:
    """Links the ledger has out of service (disabled, failed to apply, refused re-enable), with why."""
    try:
        current = [e for e in _ledger(db).current().values() if all_ or e.state in OUT_OF_SERVICE]
    except BringupError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1) from None
    if json_out:
        sys.stdout.write(json.dumps([row.to_dict() for row in current], indent=2) + "\n")
        return
    for row in current:
        when = datetime.fromtimestamp(row.at, UTC).isoformat(timespec="seconds")
        ends = " <-> ".join(x.describe() for x in row.ends)
        sys.stdout.write(f"{row.state:<16} {ends}  [{row.link}]\n    {when} by {row.actor} via {row.via}: {row.why}\n")
    if not current:
        sys.stdout.write("no link is out of service\n")


def ticket(link: Annotated[str, typer.Argument(help="Ledger link id, or one end as NAME[PORT] / 0xGUID[PORT].")],
           db: DbOption) -> None:
    """The datacenter ticket of a link: both ends' locations, cable S/N, evidence, what to replace."""
    try:
        entry = _ledger(db).find(link)
    except BringupError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1) from None
    sys.stdout.write(entry_ticket(entry))
