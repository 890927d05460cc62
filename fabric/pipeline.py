"""Inputs -> topology -> identification -> report: what `fabric validate` does, callable from code."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fabric.baseline import design_from_topology
from fabric.captures import read_capture_bytes
from fabric.design import Design, Location, load_design
from fabric.design_csv import import_cabling_sheet
from fabric.errors import FabricError, ParseError
from fabric.identify import Identification, identify
from fabric.parsers import parse_any, parse_ufm_links
from fabric.topology import Topology, merge
from fabric.validate import Report, validate


@dataclass(frozen=True)
class Result:
    design: Design
    topology: Topology
    identification: Identification
    report: Report


@dataclass(frozen=True)
class Inputs:
    """What `fabric validate` compares: exactly one design source (site, design or baseline) and one
    discovery source (capture files or live discovery)."""

    site: Path | None = None
    design: Path | None = None
    baseline: Path | None = None
    discovered: tuple[Path, ...] = ()
    live: bool = False
    timeout: float = 60.0
    ib_diags: Path | None = None  # the fabric tools' announcement (fabric.diags); default: the site's
    fmt: str = "auto"
    ufm_systems: Path | None = None


@contextmanager
def gc_paused() -> Iterator[None]:
    """Parsing a large capture makes ~100k small objects and no cycles; the cyclic GC's passes over them
    cost ~15% of the run, so it waits until the work is done."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_text(path: Path) -> str:
    data = read_capture_bytes(path)
    if b"\x00" in data[:65536]:
        raise ParseError(str(path), None, "binary data: expected the text output of an InfiniBand tool")
    return data.decode("utf-8", errors="replace")


def load_captures(paths: list[Path], fmt: str = "auto", ufm_systems: Path | None = None) -> Topology:
    texts = [(str(p), read_text(p)) for p in paths]
    if ufm_systems is not None:
        systems = read_text(ufm_systems)
        with gc_paused():
            return merge(parse_ufm_links(text, systems, label) for label, text in texts)
    return topology_from_texts(texts, fmt)


def topology_from_texts(texts: list[tuple[str, str]], fmt: str = "auto") -> Topology:
    with gc_paused():
        return merge(parse_any(text, label, fmt) for label, text in texts)


def baseline_design(path: Path, fmt: str = "auto") -> Design:
    top = load_captures([path], fmt)
    with gc_paused():
        return design_from_topology(top, name=f"baseline {path.name}")


def site_design(site_path: Path) -> Design:
    """The design a site file links to, with host locations taken from the site's racks."""
    from provision.site import load_site

    site = load_site(site_path)
    design_path = site.fabric_design
    if design_path is None:
        raise FabricError(f"{site.path}: the site has no `fabric: {{design: ...}}` cabling design to validate against")
    design = load_design(design_path)
    return with_site_locations(design, site)


def with_site_locations(design: Design, site: Any) -> Design:
    placed: dict[str, Location] = {}
    for rack in site.spec.racks:
        for host in rack.hosts:
            placed[host.hostname] = Location(str(getattr(rack, "row", "") or ""), rack.name, getattr(host, "u", None))
    nodes = {name: (n._replace(location=placed[n.host]) if n.host in placed else n)
             for name, n in design.nodes.items()}
    return replace(design, nodes=nodes)


def run(design: Design, topology: Topology) -> Result:
    with gc_paused():
        return _run(design, topology)


def _run(design: Design, topology: Topology) -> Result:
    ident = identify(design, topology)
    if design.nodes and topology.nodes and not ident.by_guid:
        raise FabricError(
            f"none of the {len(topology.nodes)} discovered nodes matches the design {design.name!r} (by GUID, "
            "description or cabling): is this a capture of a different fabric?"
        )
    return Result(design, topology, ident, validate(design, topology, ident))


def validate_inputs(inputs: Inputs, warn: Callable[[str], None]) -> Result:
    """Load the design and the discovered fabric `inputs` name and validate one against the other; `warn`
    hears each live discovery warning as it happens (they are in the topology's warnings too)."""
    if sum(x is not None for x in (inputs.site, inputs.design, inputs.baseline)) != 1:
        raise FabricError("give exactly one of --site, --design or --baseline")
    if bool(inputs.discovered) == inputs.live:
        raise FabricError("give either --discovered FILE (repeatable) or --live")
    if inputs.site is not None:
        design = site_design(inputs.site)
    elif inputs.design is not None:
        design = load_design(inputs.design)
    else:
        assert inputs.baseline is not None
        design = baseline_design(inputs.baseline, inputs.fmt)
    if inputs.live:
        topology = live_topology(inputs, warn)
    else:
        topology = load_captures(list(inputs.discovered), inputs.fmt, inputs.ufm_systems)
    return run(design, topology)


def live_topology(inputs: Inputs, warn: Callable[[str], None]) -> Topology:
    from fabric import live
    from fabric.diags import Diags

    found = live.discover(inputs.timeout, Diags.for_site(inputs.site, inputs.ib_diags))
    for warning in found.warnings:
        warn(warning)
    topology = topology_from_texts(list(found.captures))
    return replace(topology, warnings=found.warnings + topology.warnings)


def identify_captures(design_path: Path, captures: list[Path], fmt: str = "auto") -> tuple[Design, Identification]:
    """The design at `design_path` and where each node of the captures sits in it."""
    design = load_design(design_path)
    return design, identify(design, load_captures(captures, fmt))


def import_cabling(cabling: Path, switches: Path | None, name: str, width: str | None, speed: str | None,
                   columns: dict[str, str] | None = None, sheet: str | None = None) -> Design:
    """A design from a partner's cabling workbook or CSV (and optional switch list CSV)."""
    return import_cabling_sheet(cabling, read_text(switches) if switches else None, name, width, speed, columns,
                                sheet)
