"""Each injected fault comes back as exactly the matching finding; a clean fabric as none.

The captures are what ibnetdiscover/iblinkinfo print for the cabling (`sim.asbuilt`), with switches
still carrying their factory description, so every switch is placed from its neighbours.
"""

from __future__ import annotations

import json

import pytest

from fabric.design import Design, Port
from fabric.topology import NodeType
from fabric.worklist import worklist_rows
from sim.asbuilt import AsBuilt
from tests.fabric.helpers import discover, kinds


@pytest.fixture()
def ab(sim_design: Design) -> AsBuilt:
    return AsBuilt.from_design(sim_design)


@pytest.fixture(scope="module")
def names(sim_design: Design) -> dict[str, str]:
    leaves = [s.name for s in sim_design.switches() if s.tier == 1]
    spines = [s.name for s in sim_design.switches() if s.tier == 2]
    return {f"leaf{i}": n for i, n in enumerate(leaves)} | {f"spine{i}": n for i, n in enumerate(spines)}


@pytest.mark.parametrize("fmt", ["ibnetdiscover", "iblinkinfo"])
def test_clean_fabric_has_no_findings_and_every_switch_is_placed(sim_design: Design, ab: AsBuilt, fmt: str) -> None:
    result = discover(ab, sim_design, fmt=fmt)
    assert kinds(result) == []
    assert result.report.summary["clean"] is True
    placed = {p.name: p.how for p in result.identification.by_guid.values()}
    assert all(placed[s.name] == "neighbours" for s in sim_design.switches())
    assert result.identification.unplaced == ()


def test_node_name_map_renames_every_switch(sim_design: Design, ab: AsBuilt) -> None:
    result = discover(ab, sim_design)
    text = result.identification.node_name_map(sim_design)
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert len(lines) == 12
    for s in sim_design.switches():
        assert f'0x{ab.guid_of(s.name)} "{s.name}"' in lines


def test_missing_link(sim_design: Design, ab: AsBuilt, names: dict[str, str]) -> None:
    ab.unplug(Port(names["leaf0"], 21))
    [f] = discover(ab, sim_design).report.findings
    assert f.kind == "missing_link"
    assert {f.a.name, f.b.name} == {names["leaf0"], names["spine0"]}  # type: ignore[union-attr]
    assert f.cable and f.a and f.a.location and "connect cable" in f.fix


def test_port_down_when_iblinkinfo_shows_polling(sim_design: Design, ab: AsBuilt, names: dict[str, str]) -> None:
    ab.unplug(Port(names["leaf0"], 21))
    [f] = discover(ab, sim_design, fmt="iblinkinfo").report.findings
    assert f.kind == "port_down" and "Down/Polling" in f.seen


def test_unplugged_host_cable_is_port_down_with_iblinkinfo(sim_design: Design, ab: AsBuilt, names: dict[str, str]) -> None:
    ab.unplug(Port(names["leaf0"], 3))
    [f] = discover(ab, sim_design, fmt="iblinkinfo").report.findings
    assert f.kind == "port_down" and f.b is not None and f.b.name == "gpu-r1-03/mlx5_0"
    [g] = discover(ab, sim_design).report.findings  # ibnetdiscover cannot see the port: the HCA is gone
    assert g.kind == "missing_device" and g.a is not None and g.a.name == "gpu-r1-03/mlx5_0"


def test_unexpected_link(sim_design: Design, ab: AsBuilt, names: dict[str, str]) -> None:
    ab.plug(Port(names["leaf1"], 18), Port(names["leaf2"], 18))
    [f] = discover(ab, sim_design).report.findings
    assert f.kind == "unexpected_link" and "remove the cable" in f.fix


def test_miswired_uplink_to_a_free_port(sim_design: Design, ab: AsBuilt, names: dict[str, str]) -> None:
    ab.move(Port(names["leaf0"], 21), Port(names["leaf0"], 19))
    [f] = discover(ab, sim_design).report.findings
    assert f.kind == "miswired"
    assert f.a is not None and f.a.name == names["spine0"] and f.b is not None and f.b.port == 19
    assert f"{names['leaf0']}[21]" in f.fix


def test_miswired_host_cable(sim_design: Design, ab: AsBuilt, names: dict[str, str]) -> None:
    ab.move(Port(names["leaf3"], 5), Port(names["leaf3"], 18))
    [f] = discover(ab, sim_design).report.findings
    assert f.kind == "miswired" and f.a is not None and f.a.name == "gpu-r1-05/mlx5_3"
    [row] = worklist_rows([f])  # the worklist sends the technician to the plug that moves
    assert (row["device"], row["port"], row["rack"]) == (names["leaf3"], 18, "r3")


def test_swapped_pair_is_one_finding(sim_design: Design, ab: AsBuilt, names: dict[str, str]) -> None:
    ab.swap(Port(names["leaf0"], 1), Port(names["leaf0"], 2))
    [f] = discover(ab, sim_design).report.findings
    assert f.kind == "swapped"
    assert {(f.a.name, f.a.port), (f.b.name, f.b.port)} == {(names["leaf0"], 1), (names["leaf0"], 2)}  # type: ignore[union-attr]
    assert f.fix.startswith("swap the two cables")


def test_uplinks_crossed_between_spines_is_one_swapped_finding(sim_design: Design, ab: AsBuilt,
                                                                names: dict[str, str]) -> None:
    ab.swap(Port(names["spine0"], 1), Port(names["spine1"], 1))
    result = discover(ab, sim_design)
    assert kinds(result) == ["swapped"]
    assert result.identification.unplaced == ()


@pytest.mark.parametrize(("width", "speed", "seen"), [("1X", None, "1X HDR"), (None, "EDR", "4X EDR")])
def test_degraded_link(sim_design: Design, ab: AsBuilt, names: dict[str, str], width: str | None,
                       speed: str | None, seen: str) -> None:
    ab.degrade(Port(names["leaf2"], 22), width=width, speed=speed)
    [f] = discover(ab, sim_design).report.findings
    assert f.kind == "degraded" and f.expected == "4X HDR" and seen in f.seen and f.tier == "leaf-spine"


def test_missing_switch_is_one_finding(sim_design: Design, ab: AsBuilt, names: dict[str, str]) -> None:
    ab.remove_node(names["spine3"])
    [f] = discover(ab, sim_design).report.findings
    assert f.kind == "missing_device" and f.a is not None and f.a.name == names["spine3"]
    assert f.details["design_link_count"] == 40


def test_unknown_device(sim_design: Design, ab: AsBuilt, names: dict[str, str]) -> None:
    ab.add_node("rogue", NodeType.CA, 1, "rogue-host mlx5_0", 0xDEAD0000)
    ab.plug(Port(names["leaf4"], 18), Port("rogue", 1))
    result = discover(ab, sim_design)
    [f] = result.report.findings
    assert f.kind == "unknown_device" and f.a is not None and f.a.guid == "00000000dead0000"
    assert [u.guid for u in result.identification.unplaced] == ["00000000dead0000"]


def test_split_top_tier_is_one_partition_finding(sim_design: Design, ab: AsBuilt, names: dict[str, str]) -> None:
    # Imbue's "8 separate networks": spines 0-1 only reach leaves 0-3, spines 2-3 only leaves 4-7.
    for i in range(8):
        for port in range(21, 41):
            peer = ab.plugs.get(Port(names[f"leaf{i}"], port))
            if peer is None:
                continue
            spine = int(peer[0].node == names["spine2"] or peer[0].node == names["spine3"])
            if spine != (i >= 4):
                ab.unplug(Port(names[f"leaf{i}"], port))
    result = discover(ab, sim_design, starts=("gpu-r1-01/mlx5_0", "gpu-r1-01/mlx5_7"))
    [f] = result.report.findings
    assert f.kind == "partition"
    parts = f.details["parts"]
    assert [p["size"] for p in parts] == [2 + 4 + 64 + 1, 2 + 4 + 64]  # type: ignore[index]
    assert sorted(parts[1]["switches"]) == sorted([names[f"leaf{i}"] for i in range(4, 8)]  # type: ignore[index]
                                                 + [names["spine2"], names["spine3"]])
    assert len(f.details["joining_links"]) == 80  # type: ignore[arg-type]


def test_duplicate_guid(sim_design: Design, ab: AsBuilt) -> None:
    ab.set_guid("gpu-r2-03/mlx5_1", ab.nodes["gpu-r1-02/mlx5_6"].guid)
    result = discover(ab, sim_design)
    [f] = result.report.findings
    assert f.kind == "duplicate_guid" and f.a is not None and f.a.guid == ab.guid_of("gpu-r1-02/mlx5_6")
    assert f.details["hidden_devices"]


def test_several_faults_each_found_once(sim_design: Design, ab: AsBuilt, names: dict[str, str]) -> None:
    ab.swap(Port(names["leaf0"], 1), Port(names["leaf0"], 2))
    ab.unplug(Port(names["leaf5"], 30))
    ab.degrade(Port(names["leaf6"], 4), width="1X")
    ab.remove_node("gpu-r2-08/mlx5_7")
    result = discover(ab, sim_design)
    assert sorted(kinds(result)) == ["degraded", "missing_device", "missing_link", "swapped"]
    summary = result.report.summary
    assert summary["findings"]["swapped"] == 1  # type: ignore[index]
    assert summary["tiers"]["host-leaf"]["findings"] == {"swapped": 1, "degraded": 1, "missing_device": 1}  # type: ignore[index]
    json.dumps(result.report.to_dict())


def test_worklist_is_sorted_by_row_rack_u(sim_design: Design, ab: AsBuilt, names: dict[str, str]) -> None:
    ab.unplug(Port(names["leaf5"], 30))
    ab.degrade(Port(names["leaf0"], 4), width="1X")
    ab.degrade(Port(names["leaf7"], 9), speed="EDR")
    rows = worklist_rows(discover(ab, sim_design).report.findings)
    assert len(rows) == 3 and {r["rack"] for r in rows} == {"r3"}
    assert [r["u"] for r in rows] == [26, 30, 40]


def test_json_finding_shape(sim_design: Design, ab: AsBuilt, names: dict[str, str]) -> None:
    ab.swap(Port(names["leaf0"], 1), Port(names["leaf0"], 2))
    payload = discover(ab, sim_design).report.to_dict()
    [f] = payload["findings"]  # type: ignore[misc]
    assert set(f) >= {"kind", "a", "b", "expected", "seen", "fix", "tier", "cable"}
    assert set(f["a"]) == {"guid", "name", "port", "location", "description"}
    assert f["a"]["guid"].startswith("0x") and f["a"]["location"] == {"row": "A", "rack": "r3", "u": 40}


def test_imbue_scale_top_tier_cabled_as_eight_separate_networks() -> None:
    """Imbue's first day: the core tier cabled so that each rail's pod only reached its own cores."""
    from fabric.generate import generate_fat_tree
    from tests.fabric.test_design import IMBUE_PARAMS

    design = generate_fat_tree(IMBUE_PARAMS)
    ab = AsBuilt.from_design(design)
    cores = [s.name for s in design.switches() if s.tier == 3]
    spines = [s.name for s in design.switches() if s.tier == 2]
    for spine in spines:
        for port in range(33, 65):
            ab.unplug(Port(spine, port))
    free = {core: iter(range(1, 65)) for core in cores}
    for pod in range(8):
        pod_spines, pod_cores = spines[pod * 16:(pod + 1) * 16], cores[pod * 8:(pod + 1) * 8]
        for k, spine in enumerate(pod_spines):
            for j in range(32):
                core = pod_cores[(k * 32 + j) % 8]
                ab.plug(Port(spine, 33 + j), Port(core, next(free[core])), speed="NDR")
    result = discover(ab, design, starts=tuple(f"gpu-01-01/mlx5_{i}" for i in range(8)))
    [partition] = [f for f in result.report.findings if f.kind == "partition"]
    parts = partition.details["parts"]
    assert len(parts) == 8  # type: ignore[arg-type]
    assert {p["size"] for p in parts} == {16 + 16 + 8 + 511}  # type: ignore[index]
    assert result.report.summary["switches"]["placed"] == 320  # type: ignore[index]
