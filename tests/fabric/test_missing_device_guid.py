"""A missing HCA's `missing_device` finding carries the GUID the design or baseline knows (issue 16: it was
`"guid": null`, though operators search UFM and ibnetdiscover by GUID)."""

from __future__ import annotations

from fabric.baseline import design_from_topology
from fabric.design import Design, Port, build_design
from fabric.parsers import parse_ibnetdiscover
from sim.asbuilt import AsBuilt
from tests.fabric.helpers import discover

HCA = "gpu-r1-03/mlx5_0"


def _unplug_hca(ab: AsBuilt, design: Design) -> None:
    [link] = [dl for dl in design.links if HCA in (dl.a.node, dl.b.node)]
    ab.unplug(link.other(Port(HCA, 1)))


def test_the_design_files_guid_reaches_the_finding(sim_design: Design) -> None:
    ab = AsBuilt.from_design(sim_design)
    guid = ab.guid_of(HCA)
    nodes = [n._replace(guid=guid) if n.name == HCA else n for n in sim_design.nodes.values()]
    design = build_design(sim_design.name, sim_design.width, sim_design.speed, nodes, list(sim_design.links))
    _unplug_hca(ab, design)
    [finding] = discover(ab, design).report.findings
    assert finding.kind == "missing_device" and finding.a is not None
    assert finding.a.guid == guid
    assert finding.to_dict()["a"]["guid"] == f"0x{guid}"  # type: ignore[index]
    assert f"0x{guid}" in finding.fix and f"0x{guid}" in finding.line()


def test_the_baselines_guid_reaches_the_finding(sim_design: Design) -> None:
    ab = AsBuilt.from_design(sim_design)
    baseline = design_from_topology(parse_ibnetdiscover(ab.render(), "baseline"), name="baseline")
    guid = ab.guid_of(HCA)
    [name] = [n.name for n in baseline.nodes.values() if n.guid == guid]
    _unplug_hca(ab, sim_design)
    findings = [f for f in discover(ab, baseline).report.findings if f.kind == "missing_device"]
    assert [(f.a.name, f.a.guid) for f in findings if f.a is not None] == [(name, guid)]


def test_a_design_without_the_guid_still_says_null(sim_design: Design) -> None:
    ab = AsBuilt.from_design(sim_design)
    _unplug_hca(ab, sim_design)
    [finding] = discover(ab, sim_design).report.findings
    assert finding.a is not None and finding.a.guid is None and "GUID" not in finding.fix
