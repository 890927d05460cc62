"""`fabric burnin`: plan InfiniBand burn-in stages from the fabric's real forwarding tables.

`plan --discovered ibnetdiscover.txt --routing lfts.txt` needs no site: every HCA whose node
description names a host takes part (`--hosts 'gpu-*'` keeps only matching hosts). `--routing` is the
output of `dump_lfts` or the concatenated `ibroute` of every switch, taken after the SM programmed them.
Errors are one readable line on stderr and exit 1.
"""

from __future__ import annotations

import fnmatch
import json
import sys
from pathlib import Path

import typer

from fabric.burnin.lft import parse_lfts
from fabric.burnin.plan import make_plan
from fabric.burnin.render import plan_json, plan_text
from fabric.burnin.routes import build_routing
from fabric.errors import FabricError
from fabric.identify import ca_name_from_description
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from fabric.topology import NodeType

burnin_app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise FabricError(f"{path}: cannot read: {e.strerror or e}") from None


@burnin_app.command("plan")
def plan_command(
    discovered: Path = typer.Option(..., "--discovered", help="ibnetdiscover output of the fabric."),  # noqa: B008
    routing: Path = typer.Option(..., "--routing", help="dump_lfts output, or every switch's ibroute."),  # noqa: B008
    hosts: str | None = typer.Option(None, "--hosts", help="Only hosts matching this glob take part."),
    as_json: bool = typer.Option(False, "--json", help="The plan as JSON (what `fabric burnin run` reads)."),
) -> None:
    """Stages of HCA-to-HCA flows that burn every routed directed link at full rate."""
    try:
        top = parse_ibnetdiscover(_read(discovered), str(discovered))
        dump = parse_lfts(_read(routing), str(routing))
        chosen = None
        if hosts is not None:
            chosen = {label.split("/", 1)[0] for n in top.nodes.values() if n.type is not NodeType.SWITCH
                      and (label := ca_name_from_description(n.description)) is not None}
            chosen = {h for h in chosen if fnmatch.fnmatchcase(h, hosts)}
            if not chosen:
                raise FabricError(f"no host in {discovered} matches --hosts {hosts!r}")
        plan = make_plan(build_routing(top, dump, chosen))
        out = json.dumps(plan_json(plan), indent=1) + "\n" if as_json else plan_text(plan)
    except FabricError as exc:
        sys.stderr.write(f"fabric burnin: error: {str(exc).replace(chr(10), '; ')}\n")
        raise typer.Exit(1) from None
    sys.stdout.write(out)


@burnin_app.callback()
def _group() -> None:
    """Keeps `plan` a subcommand (typer folds a one-command app into the command itself)."""
