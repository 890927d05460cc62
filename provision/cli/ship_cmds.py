"""`provision ship`: the training environment (`python -m training pack-env`) to the hosts, as a tree."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from provision.cli.app import app, common_options
from provision.command.context import Context
from provision.command.exits import problems_unless
from provision.command.options import Common, HostsOpt
from provision.command.output import console, emit_json, esc
from provision.errors import BringupError
from provision.hostfiles import held_back
from provision.ship.fanout import DEST, RAW_PUSH, HostShip, ShipConfig, Shipper
from provision.ship.tree import plan_direct, plan_tree
from provision.site.bounded import read_text
from provision.site.select import select_hosts
from provision.ssh import SshSettings
from provision.state.lifecycle import State
from provision.state.notes import note

MAX_MANIFEST_BYTES = 1 << 20


class ShipError(BringupError):
    """The archive or its manifest cannot be shipped."""


def _load(env_dir: Path) -> tuple[Path, dict[str, Any]]:
    archive, manifest = env_dir / "bringup-env.tar.gz", env_dir / "bringup-env.manifest.json"
    if not archive.is_file() or not manifest.is_file():
        raise ShipError(f"{env_dir}: no bringup-env.tar.gz and bringup-env.manifest.json (python -m training pack-env)")
    data = json.loads(read_text(manifest, limit=MAX_MANIFEST_BYTES, what="environment manifest"))
    if not isinstance(data, dict) or not {"env_id", "archive_sha256", "versions", "prefix"} <= data.keys():
        raise ShipError(f"{manifest}: not a pack-env manifest")
    return archive, data


def _record(ctx: Context, results: list[HostShip], manifest: dict[str, Any], dest: str) -> None:
    for r in results:
        evidence = {"env_id": manifest["env_id"], "archive_sha256": manifest["archive_sha256"],
                    "versions": manifest["versions"], "source": r.source, "dest": dest.replace("{host}", r.host)}
        if r.ok:
            note(ctx.store, r.host, reason="env_shipped", command="ship", evidence=evidence)
        else:
            note(ctx.store, r.host, reason="env_ship_failed", command="ship", evidence={**evidence, "error": r.error})


@app.command()
@common_options
def ship(
    env_dir: Annotated[Path, typer.Option("--env", help="Folder pack-env wrote (archive and manifest).")],
    hosts: HostsOpt = None,
    dest: Annotated[str, typer.Option("--dest", help="Folder on each host ({host}: its name).")] = DEST,
    push: Annotated[str, typer.Option("--push", help="Host-to-host copy, run on the source host.")] = RAW_PUSH,
    encoding: Annotated[str, typer.Option("--encoding", help="raw, or base64 for text-only sessions.")] = "raw",
    seeds: Annotated[int, typer.Option("--seeds", help="Copies the controller sends itself.", min=1)] = 2,
    direct: Annotated[bool, typer.Option("--direct", help="Send every copy from the controller (baseline).")] = False,
    deep: Annotated[bool, typer.Option("--deep", help="Also check every file of the unpacked tree.")] = False,
    record: Annotated[bool, typer.Option("--record/--no-record", help="env_shipped in each host's history.")] = True,
    *,
    common: Common,
) -> None:
    """Ship the environment archive to the hosts (`--hosts golden`: the golden set) as a tree; verify each."""
    ctx = Context.of(common)
    archive, manifest = _load(env_dir)
    flying = held_back(ctx.store) if hosts == "golden" else {}  # left out, as by the golden hostfile
    names = [h for h in ctx.store.in_state(State.golden) if h not in flying] if hosts == "golden" else \
        [h.hostname for h in select_hosts(ctx.site, hosts)]
    cfg = ShipConfig(dest=dest, push=push, encoding=encoding, deep=deep)
    shipper = Shipper(SshSettings.from_site(ctx.site), cfg, archive, manifest)
    rounds = plan_direct(names) if direct else plan_tree(names, seeds)
    start = time.monotonic()
    results = asyncio.run(shipper.run(rounds))
    wall = time.monotonic() - start
    if record:
        _record(ctx, results, manifest, dest)
    bad = [r for r in results if not r.ok]
    payload = {"env_id": manifest["env_id"], "hosts": len(results), "ok": len(results) - len(bad),
               "rounds": len(rounds), "controller_copies": shipper.controller_copies, "wall_s": round(wall, 2),
               "failed": {r.host: r.error for r in bad}, "held_back": flying}
    if common.json_out:
        emit_json(payload)
    else:
        console.print(f"env {esc(str(manifest['env_id']))}: {payload['ok']}/{len(results)} hosts in {wall:.1f} s, "
                      f"{len(rounds)} rounds, {shipper.controller_copies} copies from the controller")
        for host, why in sorted(payload["failed"].items()):
            console.print(f"[red]failed[/] {esc(host)}: {esc(why)}")
        for host, why in flying.items():
            console.print(f"[yellow]left out[/] {esc(host)}: {esc(why)}")
    problems_unless(not bad)
