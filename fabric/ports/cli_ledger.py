"""`fabric ports list` and `fabric ports ticket LINK`: what the port ledger says is out of service, and why.

Both read the site's state store (`--db`, else $BRINGUP_STATE_DB, else the site's default), opened as every
command opens it (this site's database only; a mistyped directory is an error), and change nothing. A link
whose latest row is an intent (`planned`, `reenabling`) is shown in flight: a run is changing it, or was cut
short, and the next acting run (`fabric ports apply --apply`, `reenable`) reads its ports and records what
happened.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from fabric.errors import FabricError
from fabric.options import DbOpt, JsonOpt, SiteOpt, site_path
from fabric.ports.ledger import IN_FLIGHT, OUT_OF_SERVICE, Ledger
from fabric.ports.ticket import entry_ticket
from provision.site.index import load_index
from provision.site.store import open_store
from provision.state.secret_values import mask, mask_tree

IN_FLIGHT_NOTE = ("in flight: a run is changing this link or was cut short; the next `fabric ports apply --apply` "
                  "or `reenable` reads its ports and records what happened")


def _ledger(site: Path | None, db: Path | None) -> Ledger:
    index = load_index(site_path(site))
    path = index.paths.state_db(db)
    if not path.is_file():
        raise FabricError(f"{path}: no state database here (--db, $BRINGUP_STATE_DB or the site's default)")
    return Ledger(open_store(index, db))


def list_links(site: SiteOpt = None, db: DbOpt = None,
               all_: Annotated[bool, typer.Option("--all", help="Re-enabled links too.")] = False,
               json_out: JsonOpt = False) -> None:
    """Links the ledger has out of service (disabled, failed to apply, refused re-enable, in flight), with why."""
    current = [e for e in _ledger(site, db).current().values() if all_ or e.state in OUT_OF_SERVICE]
    if json_out:
        rows = [{**row.to_dict(), "in_flight": row.state in IN_FLIGHT} for row in current]
        sys.stdout.write(mask(json.dumps(mask_tree(rows), indent=2)) + "\n")  # the site's credentials masked
        return
    for row in current:
        when = datetime.fromtimestamp(row.at, UTC).isoformat(timespec="seconds")
        ends = " <-> ".join(x.describe() for x in row.ends)
        sys.stdout.write(mask(f"{row.state:<16} {ends}  [{row.link}]\n    {when} by {row.actor} via {row.via}: "
                              f"{row.why}\n"))
        if row.state in IN_FLIGHT:
            sys.stdout.write(f"    {IN_FLIGHT_NOTE}\n")
    if not current:
        sys.stdout.write("no link is out of service\n")


def ticket(link: Annotated[str, typer.Argument(help="Ledger link id, or one end as NAME[PORT] / 0xGUID[PORT].")],
           site: SiteOpt = None, db: DbOpt = None) -> None:
    """The datacenter ticket of a link: both ends' locations, cable S/N, evidence, what to replace."""
    entry = _ledger(site, db).find(link)
    sys.stdout.write(mask(entry_ticket(entry)))
