"""`fabric`: cabling designs, fabric captures, identification and validation.

Every command takes `--json`. Errors are one readable line on stderr. `fabric validate` exits 0 when the
fabric matches its design, 1 when there are findings, 2 when it could not validate (bad input, no design,
discovery failed).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import typer

from fabric.errors import FabricError
from provision.errors import BringupError

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
design_app = typer.Typer(no_args_is_help=True, help="Cabling design files: generate, import, check.")
app.add_typer(design_app, name="design")

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def _emit(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")


def _err(message: str) -> None:
    sys.stderr.write(f"fabric: error: {message}\n")


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise FabricError(f"{path}: cannot write: {e.strerror or e}") from None


@app.command()
def validate(
    site: Path | None = typer.Option(None, "--site", help="Site file; its `fabric.design` is the design."),
    design: Path | None = typer.Option(None, "--design", help="Cabling design file (instead of --site)."),
    baseline: Path | None = typer.Option(None, "--baseline", help="Known-good capture to compare with (no site)."),
    discovered: list[Path] = typer.Option([], "--discovered", help="Capture(s): ibnetdiscover [-p], iblinkinfo "
                                          "[-l] or UFM links JSON; several are merged (one per attachment point)."),
    live: bool = typer.Option(False, "--live", help="Run ibnetdiscover now (here, or on the simulated fabric)."),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds each live discovery may take."),
    sim_state: Path | None = typer.Option(None, "--sim-state", help="Simulated fabric state file (default: "
                                          "$BRINGUP_IBSIM_STATE, else the site's `python -m sim up` lab)."),
    fmt: str = typer.Option("auto", "--format", help="auto, ibnetdiscover, ibnetdiscover-p, iblinkinfo, ufm-links."),
    ufm_systems: Path | None = typer.Option(None, "--ufm-systems", help="UFM /resources/systems JSON (node types "
                                            "and names for --discovered UFM links JSON)."),
    as_json: bool = typer.Option(False, "--json", help="Print {findings, summary} as JSON."),
    worklist: Path | None = typer.Option(None, "--worklist", help="Write the datacenter worklist CSV here."),
    node_name_map: Path | None = typer.Option(None, "--node-name-map", help="Write the OpenSM node-name-map here."),
) -> None:
    """Prove the fabric is cabled as designed: exit 0 clean, 1 findings, 2 could not validate."""
    from fabric import live as live_mod
    from fabric.design import load_design
    from fabric.pipeline import baseline_design, load_captures, run, site_design, topology_from_texts
    from fabric.worklist import worklist_csv

    sources = [x for x in (site, design, baseline) if x is not None]
    if len(sources) != 1:
        raise FabricError("give exactly one of --site, --design or --baseline")
    if bool(discovered) == live:
        raise FabricError("give either --discovered FILE (repeatable) or --live")
    if site is not None:
        the_design = site_design(site)
    elif design is not None:
        the_design = load_design(design)
    else:
        assert baseline is not None
        the_design = baseline_design(baseline, fmt)
    if live:
        if sim_state is None and site is not None and not os.environ.get(live_mod.SIM_STATE_ENV):
            sim_state = live_mod.lab_state_for_site(site)
        found = live_mod.discover(timeout, sim_state)
        for warning in found.warnings:
            sys.stderr.write(f"fabric: warning: {warning}\n")
        topology = topology_from_texts(list(found.captures))
        topology = replace(topology, warnings=found.warnings + topology.warnings)
    else:
        topology = load_captures(list(discovered), fmt, ufm_systems)
    result = run(the_design, topology)
    report = result.report
    if worklist is not None:
        _write(worklist, worklist_csv(report.findings))
    if node_name_map is not None:
        _write(node_name_map, result.identification.node_name_map(the_design))
    if as_json:
        _emit(report.to_dict())
    else:
        _print_report(result)
    raise _Exit(EXIT_FINDINGS if report.findings else EXIT_CLEAN)


def _print_report(result: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    report = result.report
    s = report.summary
    for f in report.findings:
        console.print(f"[bold]{f.kind}[/bold] {f.line().split(': ', 1)[1]}", markup=True)
    table = Table(title=f"fabric {s['design']} vs {s['discovered_from']}")
    table.add_column("tier")
    table.add_column("designed links", justify="right")
    table.add_column("findings")
    for tier, row in s["tiers"].items():
        found = ", ".join(f"{k} {n}" for k, n in row["findings"].items()) or "-"
        table.add_row(tier, str(row["designed_links"]), found)
    console.print(table)
    sw, ca = s["switches"], s["cas"]
    console.print(f"switches: {sw['placed']}/{sw['designed']} placed ({sw['discovered']} discovered); "
                  f"HCAs: {ca['placed']}/{ca['designed']} placed ({ca['discovered']} discovered); "
                  f"{s['warning_count']} parser warning(s)")
    unplaced = result.identification.unplaced
    for u in unplaced[:10]:
        console.print(f"could not place {u.type} 0x{u.guid} \"{u.description}\": {u.reason}", markup=False)
    if len(unplaced) > 10:
        console.print(f"... and {len(unplaced) - 10} more unplaced (see --json or `fabric identify`)")
    verdict = "clean: cabled as designed" if s["clean"] else f"{s['total_findings']} finding(s)"
    console.print(f"[bold]{verdict}[/bold]")


@app.command()
def identify(
    design: Path = typer.Option(..., "--design", help="Cabling design file."),
    discovered: list[Path] = typer.Option(..., "--discovered", help="Capture(s) to identify."),
    fmt: str = typer.Option("auto", "--format"),
    node_name_map: Path | None = typer.Option(None, "--node-name-map", help="Write the node-name-map here."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Name every discovered switch by its physical location; report those that cannot be placed."""
    from fabric.design import load_design
    from fabric.identify import identify as do_identify
    from fabric.pipeline import load_captures

    the_design = load_design(design)
    top = load_captures(list(discovered), fmt)
    ident = do_identify(the_design, top)
    text = ident.node_name_map(the_design)
    if node_name_map is not None:
        _write(node_name_map, text)
    if as_json:
        _emit({
            "placed": [{"guid": f"0x{p.guid}", "name": p.name, "how": p.how} for p in ident.by_guid.values()],
            "unplaced": [{"guid": u.guid, "type": str(u.type), "description": u.description, "reason": u.reason}
                         for u in ident.unplaced],
            "notes": list(ident.notes),
        })
    else:
        if node_name_map is None:
            sys.stdout.write(text)
        for u in ident.unplaced:
            sys.stdout.write(f"unplaced {u.type} 0x{u.guid} \"{u.description}\": {u.reason}\n")
    raise _Exit(EXIT_FINDINGS if ident.unplaced else EXIT_CLEAN)


@app.command()
def parse(
    capture: Path = typer.Argument(..., help="A capture file."),
    fmt: str = typer.Option("auto", "--format"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Parse a capture and print what it holds (nodes, links, down ports, warnings)."""
    from fabric.pipeline import load_captures

    top = load_captures([capture], fmt)
    payload = {
        "source": top.source,
        "switches": len(top.switches()),
        "cas": len(top.cas()),
        "links": len(top.links),
        "down_ports": len(top.down_ports),
        "guid_conflicts": [{"guid": c.guid, "evidence": list(c.evidence)} for c in top.conflicts],
        "warnings": list(top.warnings),
    }
    if as_json:
        _emit(payload)
    else:
        for k, v in payload.items():
            if isinstance(v, list):
                for item in v:
                    sys.stdout.write(f"{k}: {item}\n")
            else:
                sys.stdout.write(f"{k}: {v}\n")


@design_app.command("generate")
def design_generate(
    hosts: int = typer.Option(..., "--hosts"),
    hcas: int = typer.Option(8, "--hcas", help="HCAs per host."),
    radix: int = typer.Option(40, "--radix", help="Switch port count."),
    tiers: int = typer.Option(2, "--tiers", help="2 or 3."),
    rails: int | None = typer.Option(None, "--rails", help="Default: one rail per HCA."),
    hosts_per_rack: int = typer.Option(8, "--hosts-per-rack"),
    host_name: str = typer.Option("gpu-{rack:02d}-{slot:02d}", "--host-name"),
    service_host: list[str] = typer.Option([], "--service-host", help="Host with one HCA (controller, UFM)."),
    spines: int | None = typer.Option(None, "--spines", help="2 tiers: spine count (default: enough ports)."),
    speed: str = typer.Option("HDR", "--speed"),
    model: str = typer.Option("QM8700", "--model"),
    name: str = typer.Option("fabric", "--name"),
    row_name: str = typer.Option("{row}", "--row-name"),
    rack_name: str = typer.Option("{rack:02d}", "--rack-name"),
    first_u: int = typer.Option(1, "--first-u"),
    host_height_u: int = typer.Option(4, "--host-height-u"),
    out: Path | None = typer.Option(None, "--out", help="Write here (default: stdout)."),
    as_json: bool = typer.Option(False, "--json", help="Print a summary as JSON."),
) -> None:
    """Generate a 2-tier or 3-tier (rail-optimised) fat-tree design."""
    from fabric.design import dump_design
    from fabric.generate import FatTreeParams, describe, generate_fat_tree

    params = FatTreeParams(hosts=hosts, hcas_per_host=hcas, radix=radix, tiers=tiers, rails=rails,
                           hosts_per_rack=hosts_per_rack, host_name=host_name, service_hosts=tuple(service_host),
                           spines=spines, speed=speed, switch_model=model, name=name, row_name=row_name,
                           rack_name=rack_name, first_u=first_u, host_height_u=host_height_u)
    d = generate_fat_tree(params)
    header = (f"Generated by: {describe(params)}\n"
              f"{len(d.switches())} switches, {len(d.cas())} HCAs, {len(d.links)} links")
    text = dump_design(d, header)
    if out is not None:
        _write(out, text)
    summary = {"switches": len(d.switches()), "cas": len(d.cas()), "links": len(d.links),
               "tiers": {str(t): sum(1 for s in d.switches() if s.tier == t) for t in range(1, tiers + 1)},
               "out": str(out) if out else None}
    if as_json:
        _emit(summary)
    elif out is None:
        sys.stdout.write(text)
    else:
        sys.stdout.write(f"{out}: {summary['switches']} switches, {summary['cas']} HCAs, {summary['links']} links\n")


@design_app.command("import-csv")
def design_import_csv(
    cabling: Path = typer.Argument(..., help="Cabling spreadsheet (CSV)."),
    switches: Path | None = typer.Option(None, "--switches", help="Switch list CSV (name, model, ports, tier, "
                                         "row, rack, u)."),
    name: str = typer.Option("fabric", "--name"),
    speed: str | None = typer.Option(None, "--speed", help="Expected speed (e.g. NDR) of rows without a speed "
                                     "column; required unless every row gives one."),
    width: str | None = typer.Option(None, "--width", help="Expected width (e.g. 4X) of rows without a width "
                                     "column; required unless every row gives one."),
    out: Path | None = typer.Option(None, "--out"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Turn a partner's cabling CSV into a design file."""
    from fabric.design import dump_design
    from fabric.design_csv import parse_cabling_csv
    from fabric.pipeline import read_text

    d = parse_cabling_csv(read_text(cabling), read_text(switches) if switches else None, str(cabling), name,
                          width, speed)
    text = dump_design(d, f"Imported from {cabling.name} by `fabric design import-csv`")
    if out is not None:
        _write(out, text)
    if as_json:
        _emit({"switches": len(d.switches()), "cas": len(d.cas()), "links": len(d.links)})
    elif out is None:
        sys.stdout.write(text)


@design_app.command("check")
def design_check(
    path: Path = typer.Argument(..., help="Design file."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Validate a design file (undeclared switches, duplicate ports, bad port numbers...)."""
    from fabric.design import load_design

    d = load_design(path)
    summary = {"design": d.name, "switches": len(d.switches()), "cas": len(d.cas()), "links": len(d.links)}
    if as_json:
        _emit({"ok": True, **summary})
    else:
        sys.stdout.write(f"{path}: ok: {summary['switches']} switches, {summary['cas']} HCAs, "
                         f"{summary['links']} links\n")


def main(argv: list[str] | None = None) -> int:
    try:
        app(args=argv, prog_name="fabric", standalone_mode=False)
    except _Exit as e:
        return e.code
    except (FabricError, BringupError) as exc:
        _err(str(exc).replace("\n", "; "))
        return EXIT_ERROR
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return EXIT_ERROR
    except click.exceptions.Abort:
        _err("aborted")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except Exception as exc:
        if os.environ.get("BRINGUP_DEBUG"):
            raise
        _err(f"internal error: {type(exc).__name__}: {exc} (set BRINGUP_DEBUG=1 for the traceback)")
        return EXIT_ERROR
    return EXIT_CLEAN


if __name__ == "__main__":
    sys.exit(main())
