"""`provision ethernet check`: where every BMC and PXE NIC is plugged, asked of the management switches.

Exit codes as every command's (provision/command/exits.py): 0 every NIC where the design says, 1 could not check
(no design, bad design, no credential for any switch...), 2 findings (including `unknown`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

# Typer runs a lone registered command as the whole program: load the lifecycle commands beside it.
import provision.cli.lifecycle_cmds  # noqa: F401
from provision.cli.app import app, common_options
from provision.command.context import Context
from provision.command.exits import problems_unless
from provision.command.options import Common, SiteOrNone
from provision.command.output import console, emit_json, esc

if TYPE_CHECKING:
    from provision.ethernet.design import EthernetDesign

ethernet_app = typer.Typer(no_args_is_help=True, help="Ethernet cabling of BMC and PXE NICs, from the switches.")
app.add_typer(ethernet_app, name="ethernet")


@ethernet_app.command("check")
@common_options
def check_cmd(
    *,
    common: Common,
    design: Annotated[Path | None, typer.Option(
        "--design", help="Ethernet design file (default: ethernet.yml beside the site file).")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=256,
                                             help="Switches read at once.")] = 16,
    timeout: Annotated[float, typer.Option("--timeout", min=0.5, max=300,
                                           help="Seconds for each connect, login and command.")] = 10.0,
    out: Annotated[Path | None, typer.Option("--out", help="Also write the JSON here (the report reads "
                                             "ethernet-check.json from the run directory).")] = None,
) -> None:
    """Locate every BMC and PXE MAC on the switches and compare with the design: wrong port (swap pairs),
    unplugged, error-disabled, seen twice, wrong VLAN, unknown (switch unreadable)."""
    from provision.ethernet.check import check
    from provision.ethernet.design import load_design
    from provision.ethernet.names import site_names
    from provision.ethernet.rule import site_positions
    from provision.site.credentials import login

    ctx = Context.of(common)
    site = ctx.site
    eth = load_design(design or site.directory / "ethernet.yml", site_positions(site), site.spec.switches)
    facts = {h: f for h, f in ctx.store.facts_many().items() if h in eth.nics}
    macs = {(h, role): mac for h, f in facts.items()
            for role, mac in (("pxe", f.pxe_mac), ("bmc", f.bmc_mac)) if mac}
    names = site_names(site, eth.nics, {h: f.service_tag for h, f in facts.items()})
    report = check(eth, lambda name: login(site, name), macs, concurrency=concurrency, timeout=timeout,
                   names=names)
    data = report.to_json()
    if out is not None:
        out.write_text(json.dumps(data, indent=2) + "\n")
    if common.json_out:
        emit_json(data)
    else:
        _print(data)
    problems_unless(not report.findings)


def _print(data: dict[str, object]) -> None:
    switches = data["switches"]
    assert isinstance(switches, list)
    for s in switches:
        if s["state"] != "ok":
            console.print(f"switch {esc(s['name'])} ({esc(s['address'])}): unknown: {esc(s['reason'])}")
    findings = data["findings"]
    assert isinstance(findings, list)
    for f in findings:
        console.print(f"{esc(f['host'])} {f['role'].upper()} NIC {esc(f['mac'])}: {f['status']}: "
                      f"{esc(f['reason'])}\n    fix: {esc(f['fix'])}")
    ok = sum(1 for s in switches if s["state"] == "ok")
    console.print(f"ethernet: {ok}/{len(switches)} switches read, {len(findings)} findings, counts "
                  f"{esc(json.dumps(data['counts']))}, {data['seconds']} s")



@ethernet_app.command("import")
def import_cmd(
    sheet_file: Annotated[Path, typer.Argument(help="The datacenter's workbook (.xlsx) or CSV: one row per host.")],
    switches_from: Annotated[Path | None, typer.Option("--switches-from", help="A design file whose `switches:` the "
                             "rows refer to (default: the site's switches).")] = None,
    site_file: SiteOrNone = None,
    rule: Annotated[str, typer.Option("--rule", help="auto: write the rule (rack's top-of-rack switch, port = U) "
                    "when every row follows it; always: the rule plus the rows it does not give; never: one entry "
                    "per host. auto/always need --site.")] = "auto",
    columns: Annotated[str | None, typer.Option("--columns", help="The partner's headers: 'host=Server,"
                       "pxe_switch=Data SW,pxe_port=Data Port' (fields: host, bmc_switch, bmc_port, pxe_switch, "
                       "pxe_port, bmc_mac, pxe_mac, bmc_vlan, pxe_vlan).")] = None,
    columns_file: Annotated[Path | None, typer.Option("--columns-file", help="The same as a YAML/JSON object.")] = None,
    sheet: Annotated[str | None, typer.Option("--sheet", help="Read only this sheet of a workbook.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the design here (default: stdout).")] = None,
) -> None:
    """Turn the datacenter's NIC cabling sheet into an Ethernet design (every bad row reported: exit 1)."""
    design, why = _imported(sheet_file, switches_from, site_file, rule, columns, columns_file, sheet)
    _write_design(design, why, switches_from is not None, out)


def _imported(sheet_file: Path, switches_from: Path | None, site_file: Path | None, rule: str,
              columns: str | None, columns_file: Path | None, sheet: str | None) -> tuple[EthernetDesign, str]:
    """(the design to write, why it is in rule form or not)."""
    from provision.ethernet.design import EthernetDesign, EthernetDesignError, load_design
    from provision.ethernet.import_rule import MODES, fit_rule
    from provision.ethernet.importer import NIC_FIELDS, import_nics
    from provision.ethernet.rule import site_positions
    from provision.site import load_site
    from provision.site.sheets import mapping_from_option

    if rule not in MODES:
        raise EthernetDesignError(f"--rule {rule!r}: give one of {', '.join(MODES)}")
    site = load_site(site_file) if site_file is not None else None
    if switches_from is None and site is None:
        raise EthernetDesignError("give --site (its switches) or --switches-from (a design's switches)")
    if switches_from is not None:
        base = load_design(switches_from)
    else:
        assert site is not None
        base = EthernetDesign(switches=dict(site.spec.switches))
    mapping = mapping_from_option(columns, columns_file, NIC_FIELDS)
    design = import_nics(sheet_file, base, mapping, sheet)
    if site is None:
        return design, "rows (no --site: the rule needs the site's racks)"
    fit = fit_rule(design, site_positions(site), rule)
    return fit.design, fit.why


def _write_design(design: EthernetDesign, why: str, with_switches: bool, out: Path | None) -> None:
    import yaml

    data = design.model_dump(exclude_none=True)
    if not with_switches:
        data.pop("switches", None)  # the site's: ethernet.yml names them
    if design.rule is None:
        data.pop("rule", None)
    text = yaml.safe_dump(data, sort_keys=True)
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text)
        console.print(f"{esc(str(out))}: {len(design.switches)} switches, {len(design.nics)} hosts; {esc(why)}")
