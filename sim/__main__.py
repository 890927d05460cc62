"""`python -m sim up|down|status|env|demo`: the simulated lab's entry point."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated


def _single_quoted(value: str) -> str:
    """`value` as one literal shell word, always in single quotes (as shlex.quote writes unsafe words): a
    quote, `$(...)` or a newline in it stays text under `eval "$(python -m sim env)"`."""
    return "'" + value.replace("'", "'\"'\"'") + "'"

def _unshadow() -> None:
    """`python -m sim` in a directory with its own `sim/` imports that one as `sim` (the working directory
    comes first on sys.path), and the lab found no simulators in it. Put this package back before the rest."""
    here = Path(__file__).resolve().parent
    module = sys.modules.get("sim")
    if module is not None and getattr(module, "__file__", None) and Path(module.__file__ or "").parent == here:
        return
    cwd = str(Path.cwd())
    sys.path[:] = [str(here.parent)] + [p for p in sys.path if p not in ("", ".", cwd)]
    for name in [n for n in sys.modules if n == "sim" or n.startswith("sim.")]:
        del sys.modules[name]


_unshadow()

import typer  # noqa: E402  (after _unshadow: every `sim` import below must be this package)

from provision.command.exits import ERROR, command_app, run_app  # noqa: E402
from provision.command.options import JsonOpt, SiteOpt  # noqa: E402
from provision.command.output import console, emit_json  # noqa: E402
from sim import secrets  # noqa: E402
from sim.lab import (  # noqa: E402
    LabContext,
    optional_service_names,
    parse_with,
)
from sim.lab_of_site import open_context, open_lab  # noqa: E402

app = command_app("sim", "The simulated lab: BMCs, MAAS API, UFM, IB fabric and test hosts on loopback addresses.")

WithOpt = Annotated[list[str] | None, typer.Option(
    "--with", help="Also start an opt-in simulator, NAME or NAME=ARG (testhosts=N: N Debian test hosts; "
                   "needs root, the first start runs debootstrap).")]


@app.command()
def up(site: SiteOpt = None, json_out: JsonOpt = False, with_: WithOpt = None) -> None:
    """Start every simulator of the site (and the opt-in ones named by --with) and wait until each answers."""
    lab = open_lab(site, parse_with(with_ or []))
    with console.status("starting the simulated lab"):
        lab.up(detached=True)  # until `sim down` (or until what bound this command dies: sim/lifetime.py)
    if json_out:
        emit_json(lab.status())
        return
    for name, info in lab.status().items():
        console.print(f"  {name:<14} pid {info['pid']}  {'healthy' if info['healthy'] else '[red]not answering[/]'}")
    console.print(f"lab is up ({len(lab.services)} services). Credentials for a shell: eval \"$(python -m sim env)\"")


@app.command()
def down(site: SiteOpt = None, json_out: JsonOpt = False) -> None:
    """Stop every simulator of the site (SIGTERM, then SIGKILL to the whole process group)."""
    lab = open_lab(site)
    stopped = lab.down()
    # An opt-in simulator whose supervisor died uncleanly leaves its own processes: its cleanup stops them.
    ctx = open_context(site)
    problems = [p for name in optional_service_names() for p in _optional_cleanup(name, ctx)]
    if json_out:
        emit_json({"stopped": stopped, "problems": problems})
    else:
        console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        for problem in problems:
            console.print(f"[red]{problem}[/]")
    if problems:
        raise typer.Exit(1)


def _optional_cleanup(name: str, ctx: LabContext) -> list[str]:
    import importlib

    cleanup = getattr(importlib.import_module(f"sim.{name}.optional_service"), "cleanup", None)
    return list(cleanup(ctx)) if callable(cleanup) else []


@app.command()
def status(site: SiteOpt = None, json_out: JsonOpt = False) -> None:
    """Which simulators are running and healthy."""
    lab = open_lab(site)
    info = lab.status()
    if json_out:
        emit_json(info)
        return
    if not info:
        console.print("no simulators are defined for this site")
    for name, s in info.items():
        state = "healthy" if s["healthy"] else ("running, not answering" if s["pid"] else "stopped")
        console.print(f"  {name:<14} {state}")


@app.command()
def env(site: SiteOpt = None) -> None:
    """Print `export` lines with the lab's credentials and endpoints, for `eval` in a shell."""
    lab = open_lab(site)
    values = {**secrets.load_or_create(lab.run_dir), **lab.exports()}
    for name, value in values.items():
        sys.stdout.write(f"export {name}={_single_quoted(value)}\n")


@app.command()
def demo(site: SiteOpt = None) -> None:
    """Bring the lab up, run the bring-up on the embedded site, print the status, bring it down: exit 0 when the
    story ran (failed hosts and findings are part of it), 1 when a stage broke."""
    from sim.demo import run_demo

    if run_demo(site) != 0:
        raise typer.Exit(ERROR)


def main() -> int:
    return run_app(app, None, "sim")


if __name__ == "__main__":
    sys.exit(main())
