"""The options every command line of the project shares (`provision` and `fabric`), declared once.

`--site` is the site file or directory and `--db` its state database, with one meaning everywhere: the
database is `--db`, else `$BRINGUP_STATE_DB`, else `state/<site>.db` beside the site file
(`provision/site/paths.py`), opened through `provision.site.store.open_store` (this site's database only,
no directory made up from a typo). A command that acts on a site without `--site` takes `$BRINGUP_SITE`,
else the embedded simulated site; a command that can work from files alone (`fabric validate`,
`fabric topology`, `fabric burnin plan`) takes `SiteOrNone`: no site unless one is named.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

SITE_HELP = "Site file or directory (default: $BRINGUP_SITE, else the embedded sim site)."
DB_HELP = "State database (default: $BRINGUP_STATE_DB, else state/<site>.db next to the site file)."

SiteOpt = Annotated[Path | None, typer.Option("--site", help=SITE_HELP)]
SiteOrNone = Annotated[Path | None, typer.Option(
    "--site", help="Site file or directory: its design, hosts and state store (without it: only the files given).")]
DbOpt = Annotated[Path | None, typer.Option("--db", help=DB_HELP)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]
HostsOpt = Annotated[
    str | None,
    typer.Option("--hosts", help="Hosts: globs, ranges (gpu-r1-[01-04]), rack:NAME or @HOSTFILE, comma-separated "
                 "(default: every host the command applies to)."),
]


@dataclass(frozen=True)
class Common:
    """--site, --db, --adopt-db and --json: every command that reads a site takes them (as `common: Common`,
    provision/cli/app.py's `common_options`)."""

    site: SiteOpt = None
    db: DbOpt = None
    adopt_db: Annotated[bool, typer.Option(
        "--adopt-db", help="Take over a state database that records another site (it becomes this site's).")] = False
    json_out: JsonOpt = False
