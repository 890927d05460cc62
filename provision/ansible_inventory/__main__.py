"""`python -m provision.ansible_inventory [--list | --host H | --export ini|yaml] [--site S] [--db D]`.

`--list`/`--host` follow Ansible's script-inventory protocol; `--export` writes a static file. Exit codes and
errors are every command line's (provision/command/exits.py): 0 done, 1 could not (a usage error, an unreadable
site, another site's database, an unwritable `--output`: one readable line on stderr).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import click
import typer

from provision.ansible_inventory.build import load_inventory
from provision.ansible_inventory.export import to_ini, to_yaml
from provision.command.context import default_site_path
from provision.command.exits import command_app, run_app
from provision.command.options import DbOpt, SiteOpt
from provision.errors import BringupError

PROG = "python -m provision.ansible_inventory"
app = command_app(PROG, __doc__ or "")


@app.command()
def inventory(
    list_all: Annotated[bool, typer.Option("--list", help="The whole inventory as JSON.")] = False,
    host: Annotated[str | None, typer.Option("--host", help="One host's variables as JSON.")] = None,
    export: Annotated[str | None, typer.Option("--export", click_type=click.Choice(["ini", "yaml"]),
                                               help="A static inventory file.")] = None,
    site: SiteOpt = None,
    db: DbOpt = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")] = None,
) -> None:
    """The inventory from the site file and its state store: Ansible's script protocol, or a static file."""
    if sum((list_all, host is not None, export is not None)) != 1:
        raise click.UsageError("give one of --list, --host HOST, --export ini|yaml", ctx=click.get_current_context())
    built = load_inventory(site or default_site_path(), db)
    if list_all:
        text = json.dumps(built.as_list(), indent=2, sort_keys=True)
    elif host is not None:
        text = json.dumps(dict(built.hostvars.get(host, {})), indent=2, sort_keys=True)
    else:
        text = to_ini(built) if export == "ini" else to_yaml(built)
    text = text if text.endswith("\n") else text + "\n"
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise BringupError(f"--output {output}: cannot write: {exc.strerror or exc}") from None


def main(argv: list[str] | None = None) -> int:
    return run_app(app, argv, PROG)


if __name__ == "__main__":
    sys.exit(main())
