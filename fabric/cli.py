"""`fabric`: cabling designs, fabric captures, identification and validation.

Every command takes `--json`. Exit codes are every command's (provision/command/exits.py): 0 done and nothing
wrong, 1 could not do it (bad input, no design, discovery failed: one readable line on stderr), 2 it ran and
found problems (`fabric validate`'s findings, `identify`'s unplaced switches).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from fabric import render
from fabric.burnin.cli import burnin_app
from fabric.options import (
    CaptureFormat,
    Captures,
    CapturesOrNone,
    DesignFile,
    DesignFileOrNone,
    DesignName,
    DesignOut,
    IbDiags,
    JsonOpt,
    Live,
    LiveTimeout,
    NodeNameMapOut,
    SiteOrNone,
    UfmSystems,
)
from fabric.ports.cli import ports_app
from fabric.topology_cmd import topology_command
from provision.command.exits import command_app, problems_unless, run_app

app = command_app("fabric", __doc__ or "")
design_app = typer.Typer(no_args_is_help=True, help="Cabling design files: generate, import, check.")

# The sub-apps, one line each.
app.add_typer(design_app, name="design")
app.add_typer(ports_app, name="ports")
app.add_typer(burnin_app, name="burnin")
app.command("topology")(topology_command)


@app.command()
def validate(
    site: SiteOrNone = None,
    design: DesignFileOrNone = None,
    baseline: Annotated[Path | None, typer.Option(
        "--baseline", help="Known-good capture to compare with (no site).")] = None,
    discovered: CapturesOrNone = None,
    live: Live = False,
    timeout: LiveTimeout = 60.0,
    ib_diags: IbDiags = None,
    fmt: CaptureFormat = "auto",
    ufm_systems: UfmSystems = None,
    as_json: JsonOpt = False,
    worklist: Annotated[Path | None, typer.Option("--worklist", help="Write the datacenter worklist CSV here.")
                        ] = None,
    node_name_map: NodeNameMapOut = None,
) -> None:
    """Prove the fabric is cabled as designed: exit 0 clean, 2 findings, 1 could not validate."""
    from fabric.pipeline import Inputs, validate_inputs

    inputs = Inputs(site=site, design=design, baseline=baseline, discovered=tuple(discovered or ()), live=live,
                    timeout=timeout, ib_diags=ib_diags, fmt=fmt, ufm_systems=ufm_systems)
    result = validate_inputs(inputs, warn=render.warning_line)
    render.validation(result, as_json, worklist, node_name_map)
    problems_unless(not result.report.findings)


@app.command()
def identify(
    design: DesignFile,
    discovered: Captures,
    fmt: CaptureFormat = "auto",
    node_name_map: NodeNameMapOut = None,
    as_json: JsonOpt = False,
) -> None:
    """Name every discovered switch by its physical location; report those that cannot be placed."""
    from fabric.pipeline import identify_captures

    the_design, ident = identify_captures(design, list(discovered), fmt)
    render.identification(the_design, ident, as_json, node_name_map)
    problems_unless(not ident.unplaced)


@app.command()
def parse(
    capture: Annotated[Path, typer.Argument(help="A capture file.")],
    fmt: CaptureFormat = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Parse a capture and print what it holds (nodes, links, down ports, warnings)."""
    from fabric.pipeline import load_captures

    render.capture(load_captures([capture], fmt), as_json)


@design_app.command("generate")
def design_generate(
    hosts: Annotated[int, typer.Option("--hosts")],
    hcas: Annotated[int, typer.Option("--hcas", help="HCAs per host.")] = 8,
    radix: Annotated[int, typer.Option("--radix", help="Switch port count.")] = 40,
    tiers: Annotated[int, typer.Option("--tiers", help="2 or 3.")] = 2,
    rails: Annotated[int | None, typer.Option("--rails", help="Default: one rail per HCA.")] = None,
    hosts_per_rack: Annotated[int, typer.Option("--hosts-per-rack")] = 8,
    host_name: Annotated[str, typer.Option("--host-name")] = "gpu-{rack:02d}-{slot:02d}",
    service_host: Annotated[list[str] | None, typer.Option(
        "--service-host", help="Host with one HCA (controller, UFM).")] = None,
    spines: Annotated[int | None, typer.Option(
        "--spines", help="2 tiers: spine count (default: enough ports).")] = None,
    speed: Annotated[str, typer.Option("--speed")] = "HDR",
    model: Annotated[str, typer.Option("--model")] = "QM8700",
    name: DesignName = "fabric",
    row_name: Annotated[str, typer.Option("--row-name")] = "{row}",
    rack_name: Annotated[str, typer.Option("--rack-name")] = "{rack:02d}",
    first_u: Annotated[int, typer.Option("--first-u")] = 1,
    host_height_u: Annotated[int, typer.Option("--host-height-u")] = 4,
    out: DesignOut = None,
    as_json: JsonOpt = False,
) -> None:
    """Generate a 2-tier or 3-tier (rail-optimised) fat-tree design."""
    from fabric.generate import FatTreeParams, describe, generate_fat_tree

    params = FatTreeParams(hosts=hosts, hcas_per_host=hcas, radix=radix, tiers=tiers, rails=rails,
                           hosts_per_rack=hosts_per_rack, host_name=host_name,
                           service_hosts=tuple(service_host or ()), spines=spines, speed=speed, switch_model=model,
                           name=name, row_name=row_name, rack_name=rack_name, first_u=first_u,
                           host_height_u=host_height_u)
    render.generated_design(generate_fat_tree(params), describe(params), tiers, out, as_json)


@design_app.command("import")
@design_app.command("import-csv", hidden=True)
def design_import(
    cabling: Annotated[Path, typer.Argument(help="Cabling spreadsheet: .xlsx workbook (every sheet) or .csv.")],
    switches: Annotated[Path | None, typer.Option(
        "--switches", help="Switch list CSV (name, model, ports, tier, row, rack, u).")] = None,
    name: DesignName = "fabric",
    speed: Annotated[str | None, typer.Option("--speed", help="Expected speed (e.g. NDR) of rows without a speed "
                     "column; required unless every row gives one.")] = None,
    width: Annotated[str | None, typer.Option("--width", help="Expected width (e.g. 4X) of rows without a width "
                     "column; required unless every row gives one.")] = None,
    columns: Annotated[str | None, typer.Option("--columns", help="The partner's headers: 'a=Server,a_port=Srv "
                       "Port,b=Switch,b_port=Sw Port' (fields: a, a_port, b, b_port, cable, width, speed).")] = None,
    columns_file: Annotated[Path | None, typer.Option("--columns-file", help="The same mapping as a YAML/JSON "
                            "object {field: header}.")] = None,
    sheet: Annotated[str | None, typer.Option("--sheet", help="Read only this sheet of a workbook.")] = None,
    out: DesignOut = None,
    as_json: JsonOpt = False,
) -> None:
    """Turn a partner's cabling workbook or CSV into a design file (every bad row reported with sheet and row)."""
    from fabric.design_csv import CABLING_ALIASES
    from fabric.pipeline import import_cabling
    from provision.site.sheets import mapping_from_option

    mapping = mapping_from_option(columns, columns_file, CABLING_ALIASES)
    render.imported_design(import_cabling(cabling, switches, name, width, speed, mapping, sheet), cabling, out,
                           as_json)


@design_app.command("check")
def design_check(
    path: Annotated[Path, typer.Argument(help="Design file.")],
    as_json: JsonOpt = False,
) -> None:
    """Validate a design file (undeclared switches, duplicate ports, bad port numbers...)."""
    from fabric.design import load_design

    render.checked_design(load_design(path), path, as_json)


def main(argv: list[str] | None = None) -> int:
    return run_app(app, argv, "fabric")


if __name__ == "__main__":
    sys.exit(main())
