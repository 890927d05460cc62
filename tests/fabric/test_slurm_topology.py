"""`fabric topology`: Slurm's topology.conf (tree) and a leaf-grouped rank order from the as-built fabric.

Every text is also read by `_slurm_reads`, this module's own reading of topology.conf(5) as Slurm 22.05's
topology/tree plugin checks it (unique SwitchName, exactly one of Nodes/Switches, children that exist, levels
that resolve, no node under two leaves).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from fabric.burnin.history import History, LinkRow
from fabric.cli import main
from fabric.design import Design, Port
from fabric.generate import FatTreeParams, generate_fat_tree
from fabric.parsers import parse_ibnetdiscover
from fabric.pipeline import Inputs
from fabric.ports.ledger import DISABLED, REENABLED, Ledger, LedgerEnd, LedgerEntry, link_id
from fabric.slurm_topology import SlurmTopology, build, rank_order, rank_order_text, to_json, topology_conf
from fabric.topology import End, Node, NodeType, Topology, TopologyBuilder
from fabric.topology_inputs import host_map, read_exclusions
from fabric.topology_load import TopologyRequest, load_slurm_topology
from provision.state import StateStore
from sim.asbuilt import AsBuilt
from sim.slurm.lab import Partition, SlurmLab, SlurmLabSpec
from tests.fabric.conftest import FIXTURES, REPO, realdata_text
from tests.slurm.conftest import needs_slurm

SIM_SITE = REPO / "inventory" / "sim" / "site.yml"
SIM_CAPTURE = FIXTURES / "ibsim-sim-site.ibnetdiscover.txt"
DGX_H100 = "ibnetdiscover__NVIDIA-topograph__tests_output_ibnetdiscover_example.out"
_LINE = re.compile(r"SwitchName=([A-Za-z0-9_-]+) (Nodes|Switches)=(\S+)")
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


# --- Slurm's reading of the file --------------------------------------------------------------------------

def _expand(hostlist: str) -> list[str]:
    """A Slurm hostlist (`a-[01-03,07],b`) as its names."""
    parts, depth, cur = [], 0, ""
    for ch in hostlist:
        depth += (ch == "[") - (ch == "]")
        assert 0 <= depth <= 1, hostlist
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    names: list[str] = []
    for part in parts:
        m = re.fullmatch(r"([^\[\]]*)\[([0-9,-]+)\]", part)
        if m is None:
            assert "[" not in part and "]" not in part and part, hostlist
            names.append(part)
            continue
        for span in m.group(2).split(","):
            lo, _, hi = span.partition("-")
            names += [f"{m.group(1)}{i:0{len(lo)}d}" for i in range(int(lo), int(hi or lo) + 1)]
    return names


def _slurm_reads(text: str) -> dict[str, tuple[str, list[str]]]:
    """SwitchName -> (Nodes|Switches, members), failing where slurmctld 22.05 would refuse or warn."""
    switches: dict[str, tuple[str, list[str]]] = {}
    for raw in text.splitlines():
        assert all(0x20 <= ord(c) < 0x7F for c in raw), f"not printable ASCII: {raw!r}"
        if raw.startswith("#") or not raw.strip():
            continue
        m = _LINE.fullmatch(raw)
        assert m is not None, f"not topology.conf(5): {raw!r}"
        assert m.group(1) not in switches, f"Switch ({m.group(1)}) has already been defined"
        switches[m.group(1)] = (m.group(2), _expand(m.group(3)))
    assert switches, "No switches configured"
    nodes = [n for kind, members in switches.values() if kind == "Nodes" for n in members]
    assert len(nodes) == len(set(nodes)), "Multiple leaf switches contain nodes"
    assert all(_HOST.fullmatch(n) for n in nodes)
    level = {name: 0 for name, (kind, _m) in switches.items() if kind == "Nodes"}
    for _round in range(20):
        for name, (kind, members) in switches.items():
            assert kind == "Nodes" or all(c in switches and c != name for c in members), f"{name}: invalid child"
            if name not in level and all(c in level for c in members):
                level[name] = 1 + max(level[c] for c in members)
    assert set(level) == set(switches), "Switch configuration is not a tree"
    return switches


def _leaf_of(switches: dict[str, tuple[str, list[str]]]) -> dict[str, str]:
    return {n: name for name, (kind, members) in switches.items() if kind == "Nodes" for n in members}


# --- fabrics ----------------------------------------------------------------------------------------------

def _fat_tree(tiers: int = 2) -> tuple[Design, AsBuilt, Topology]:
    """12 hosts, one HCA each, on 3 leaves of 4 (radix 8): leaf-1-04-U40 has node-1-01..04, U38 node-2-*, U36
    node-3-*; switches renamed `MF0;<name>:QM8700/U1`."""
    design = generate_fat_tree(FatTreeParams(hosts=12, hcas_per_host=1, radix=8, tiers=tiers, hosts_per_rack=4,
                                             host_name="node-{rack}-{slot:02d}"))
    ab = AsBuilt.from_design(design, switch_descriptions="location")
    return design, ab, parse_ibnetdiscover(ab.render(), "fat-tree")


def _ends(design: Design, ab: AsBuilt, node: str, peer_prefix: str) -> list[tuple[LedgerEnd, LedgerEnd]]:
    """Both ends of every designed link of `node` to a node whose name starts with `peer_prefix`."""
    def end(p: Port) -> LedgerEnd:
        return LedgerEnd(ab.guid_of(p.node), p.port, p.node, "/" not in p.node)

    return [(end(here), end(there)) for lk in design.links for here, there in ((lk.a, lk.b), (lk.b, lk.a))
            if here.node == node and there.node.startswith(peer_prefix)]


def _disable(store: StateStore, ends: list[tuple[LedgerEnd, LedgerEnd]], state: str = DISABLED) -> None:
    Ledger(store).record_many(LedgerEntry(link_id(pair), 0.0, "test", "fabric ports apply", state, "dry-run",
                                          "symbol errors", pair) for pair in ends)


def _burnin(store: StateStore, link: str, verdict: str, at: float) -> None:
    history = History(store)
    run, _done = history.open_run({"stages": [], "at": at}, 1, False, resume=False)
    history.record_links(run, None, [LinkRow(run, None, link, link, verdict, None, 40, "symbol_errors +40", at)])


def _build(top: Topology, store: StateStore | None = None) -> SlurmTopology:
    return build(top, host_map(top), read_exclusions(store) if store is not None else {})


# --- the embedded site and a real capture -----------------------------------------------------------------

def test_the_embedded_site_lists_each_gpu_host_once_under_one_rail_leaf(tmp_path: Path) -> None:
    warnings: list[str] = []
    req = TopologyRequest(Inputs(site=SIM_SITE, discovered=(SIM_CAPTURE,)), db=tmp_path / "absent.db")
    t = load_slurm_topology(req, warnings.append)
    switches = _slurm_reads(topology_conf(t))
    # rail-optimised: every host's 8 HCAs reach all 8 leaves; mlx5_0's leaf is home, the spines list it alone
    assert switches["leaf-A-r3-U40"] == ("Nodes", [f"gpu-r{r}-{s:02d}" for r in (1, 2) for s in range(1, 9)])
    assert {n for n, (kind, _m) in switches.items() if kind == "Switches"} == {f"spine-A-r3-U{u}" for u in
                                                                               (18, 20, 22, 24)}
    assert all(members == ["leaf-A-r3-U40"] for kind, members in switches.values() if kind == "Switches")
    assert len(t.unlisted_leaves) == 7 and "ctl-01" not in topology_conf(t)
    assert all(len(p.leaves) == 8 for p in t.hosts if p.host != "gpu-r2-05")
    assert "SwitchName=leaf-A-r3-U40 Nodes=gpu-r1-[01-08],gpu-r2-[01-08]" in topology_conf(t)
    assert any("no state database" in w for w in warnings) and not t.islands


@pytest.mark.realdata
def test_a_real_rail_optimised_superpod_puts_each_scalable_unit_under_one_leaf() -> None:
    top = parse_ibnetdiscover(realdata_text(DGX_H100), DGX_H100)
    t = build(top, host_map(top, pattern="[ab]0*-dgx-*"))
    leaf_of = _leaf_of(_slurm_reads(topology_conf(t)))
    assert len(leaf_of) == len(t.hosts) == 119
    # a08-p1-dgx-04-c01: scalable unit 04; its HCAs reach the unit's rail leaves, its home is rail 01's
    assert all(leaf.endswith(f"-IBLEAF-01-{host.split('-')[3]}") for host, leaf in leaf_of.items())
    assert {s.level for s in t.switches} == {0, 1} and all("IBSPINE" in s.name for s in t.switches if s.level)
    assert all(p.leaf in p.leaves and len(p.leaves) in (3, 4) for p in t.hosts)
    assert t.parts == 1 and not t.islands
    assert any("factory node description" in w for w in t.warnings)


# --- links left out ---------------------------------------------------------------------------------------

def test_a_link_the_port_ledger_disabled_is_left_out(tmp_path: Path) -> None:
    design, ab, top = _fat_tree()
    with StateStore(tmp_path / "state.db") as store:
        _disable(store, _ends(design, ab, "node-1-01/mlx5_0", "leaf"))
        t = _build(top, store)
    leaf_of = _leaf_of(_slurm_reads(topology_conf(t)))
    assert "node-1-01" not in leaf_of and leaf_of["node-1-02"] == "leaf-1-04-U40"
    assert t.unplaced == ("node-1-01",) and any("node-1-01" in w for w in t.warnings)
    (gone,) = t.excluded
    assert gone.a == "leaf-1-04-U40[1]" and gone.b == "node-1-01/mlx5_0[1]" and "port ledger: disabled" in gone.why


def test_a_reenabled_link_is_used_again(tmp_path: Path) -> None:
    design, ab, top = _fat_tree()
    with StateStore(tmp_path / "state.db") as store:
        ends = _ends(design, ab, "node-1-01/mlx5_0", "leaf")
        _disable(store, ends)
        _disable(store, ends, REENABLED)
        t = _build(top, store)
    assert not t.excluded and "node-1-01" in rank_order(t)


def test_a_link_the_burn_in_judged_failed_is_left_out_until_a_later_pass(tmp_path: Path) -> None:
    design, ab, top = _fat_tree()
    uplinks = _ends(design, ab, "leaf-1-04-U38", "spine-1-04-U34")
    assert len(uplinks) == 2
    with StateStore(tmp_path / "state.db") as store:
        for a, b in uplinks:  # one direction failed is enough
            _burnin(store, f"{b.guid}[{b.port}]->{a.guid}[{a.port}]", "fail", 10.0)
        t = _build(top, store)
        switches = _slurm_reads(topology_conf(t))
        assert "leaf-1-04-U38" not in switches["spine-1-04-U34"][1]
        assert "leaf-1-04-U38" in switches["spine-1-04-U32"][1]
        assert len(t.excluded) == 2 and all(x.why.startswith("burn-in run") for x in t.excluded)
        a, b = uplinks[0]
        _burnin(store, f"{b.guid}[{b.port}]->{a.guid}[{a.port}]", "pass", 20.0)
        assert len(_build(top, store).excluded) == 1


def test_a_leaf_that_lost_every_uplink_is_its_own_island(tmp_path: Path) -> None:
    design, ab, top = _fat_tree()
    with StateStore(tmp_path / "state.db") as store:
        _disable(store, _ends(design, ab, "leaf-1-04-U40", "spine"))
        t = _build(top, store)
    text = topology_conf(t)
    switches = _slurm_reads(text)
    assert t.islands == ("leaf-1-04-U40",) and switches["leaf-1-04-U40"][1] == [f"node-1-0{i}" for i in range(1, 5)]
    assert all("leaf-1-04-U40" not in members for kind, members in switches.values() if kind == "Switches")
    (warning,) = [w for w in t.warnings if "island" in w]
    assert "every uplink left out (4: port ledger: disabled" in warning and "TopologyParam=TopoOptional" in warning
    assert "# leaf-1-04-U40: level 0" in text and "ISLAND" in text and f"# warning: {warning}" in text
    payload = to_json(t)
    assert payload["islands"] == ["leaf-1-04-U40"] and payload["parts"] == 2
    assert [s["island"] for s in payload["switches"] if s["name"] == "leaf-1-04-U40"] == [True]


# --- names ------------------------------------------------------------------------------------------------

HOSTILE_SWITCHES = ["MF0;ib-leaf-01:MQM8700/U1", 'sw "quoted" name', "evil\nSwitchName=pwn Nodes=x",
                    "\x1b[31mred\x1b[0m", "leaf[1-3],x", "#", ""]
HOSTILE_HCAS = ['node"1-01 mlx5_0', "node[1-02] mlx5_0", "\x1b[2Jnode-1-03 mlx5_0", "node-1-04 mlx5_0\r\n# x"]


def test_hostile_node_descriptions_never_reach_topology_conf_unescaped() -> None:
    _design, _ab, top = _fat_tree()
    switches = sorted(top.switches(), key=lambda n: n.guid)
    cas = sorted((n for n in top.cas() if n.description.startswith("node-1-")), key=lambda n: n.description)
    nodes = dict(top.nodes)
    for node, desc in [*zip(switches, HOSTILE_SWITCHES, strict=False), *zip(cas, HOSTILE_HCAS, strict=True)]:
        nodes[node.guid] = node._replace(description=desc)
    t = build(replace(top, nodes=nodes), host_map(replace(top, nodes=nodes)))
    text = topology_conf(t)
    read = _slurm_reads(text)
    assert "ib-leaf-01" in read and "pwn" not in read and "\x1b" not in text and "\r" not in text
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", name) for name in read)
    assert len({name.lower() for name in read}) == len(read)
    # the comment keeps each original, escaped: quotes, newline and ESC as escapes, on one line
    assert '"evil\\x0aSwitchName=pwn Nodes=x"' in text and '"\\x1b[31mred\\x1b[0m"' in text
    assert 'sw \\"quoted\\" name' in text
    placed = set(rank_order(t))
    assert "node-1-04" in placed and not placed & {'node"1-01', "node[1-02]"}
    assert any("no valid host name left out" in w and "\\x1b[2J" in w for w in t.warnings)
    assert all(_HOST.fullmatch(line) for line in rank_order_text(t).splitlines())
    json.dumps(to_json(t))


def test_a_host_on_several_leaves_is_listed_once_under_its_home_leaf() -> None:
    cables = [(f"L{i}", "S") for i in (1, 2, 4, 5, 6)]  # L3 has no uplink
    cables += [("L2", "p/mlx5_0"), ("L1", "p/mlx5_1"), ("L1", "p/mlx5_2"),  # most of its links: L1
               ("L3", "q/mlx5_0"), ("L1", "q/mlx5_1"),  # a tie: the leaf with an uplink, L1
               ("L2", "t/mlx5_0"), ("L4", "t/mlx5_1"), ("L4", "u/mlx5_0"), ("L4", "v/mlx5_0"),  # L4: most hosts
               ("L5", "w/mlx5_1"), ("L6", "w/mlx5_0")]  # a tie on everything else: mlx5_0's leaf, L6
    t = build(_wired(cables), host_map(_wired(cables)))
    assert {p.host: p.leaf for p in t.hosts} == {"p": "L1", "q": "L1", "t": "L4", "u": "L4", "v": "L4", "w": "L6"}
    assert _slurm_reads(topology_conf(t))["S"] == ("Switches", ["L1", "L4", "L6"])
    assert t.unlisted_leaves == ("L2", "L3", "L5") and not t.islands
    assert {p.host: p.leaves for p in t.hosts}["w"] == ("L5", "L6")


# --- rank order -------------------------------------------------------------------------------------------

def _wired(cables: list[tuple[str, str]]) -> Topology:
    """A fabric from `a-b` cables; names with a `/` are HCAs (`host/hca`), the others switches."""
    b = TopologyBuilder("hand-wired")
    guid = {n: f"{i + 1:016x}" for i, n in enumerate(sorted({n for c in cables for n in c}))}
    used: dict[str, int] = {}
    for name, g in guid.items():
        kind = NodeType.CA if "/" in name else NodeType.SWITCH
        b.add_node(Node(g, kind, name.replace("/", " ") if kind is NodeType.CA else f"MF0;{name}:QM9700/U1"))
    for x, y in cables:
        px, py = (used.setdefault(n, 0) + 1 for n in (x, y))
        used[x], used[y] = px, py
        b.add_port(End(guid[x], px), End(guid[y], py), "4X", "NDR", None)
        b.add_port(End(guid[y], py), End(guid[x], px), "4X", "NDR", None)
    return b.build()


def test_rank_order_groups_hosts_by_leaf_and_leaves_by_pod() -> None:
    # two pods: leaves 1 and 3 under spine a, leaves 2 and 4 under spine b; a core above both spines
    cables = [("leaf1", "spine-a"), ("leaf3", "spine-a"), ("leaf2", "spine-b"), ("leaf4", "spine-b"),
              ("spine-a", "core"), ("spine-b", "core")]
    cables += [(f"leaf{i}", f"h{i}{j}/mlx5_0") for i in (1, 2, 3, 4) for j in (2, 1)]
    t = build(_wired(cables), host_map(_wired(cables)))
    assert rank_order(t) == ("h11", "h12", "h31", "h32", "h21", "h22", "h41", "h42")
    switches = _slurm_reads(topology_conf(t))
    assert switches["core"] == ("Switches", ["spine-a", "spine-b"]) and switches["spine-a"][1] == ["leaf1", "leaf3"]


def test_rank_order_puts_each_leafs_hosts_side_by_side_in_a_three_tier_fat_tree() -> None:
    _design, _ab, top = _fat_tree(tiers=3)
    t = build(top, host_map(top))
    order = rank_order(t)
    leaf_of = _leaf_of(_slurm_reads(topology_conf(t)))
    runs = [leaf_of[h] for i, h in enumerate(order) if i == 0 or leaf_of[h] != leaf_of[order[i - 1]]]
    assert len(runs) == len(set(runs)) == 3
    assert order == tuple(f"node-{r}-{s:02d}" for r in (1, 2, 3) for s in range(1, 5))
    assert {s.level for s in t.switches} == {0, 1, 2}


def test_rank_order_is_a_hostfile_the_training_launcher_reads() -> None:
    from training.launcher import parse_hostfile

    _design, _ab, top = _fat_tree()
    text = rank_order_text(build(top, host_map(top)))
    assert [h.name for h in parse_hostfile(text, 8)] == [line for line in text.splitlines()]


# --- the command ------------------------------------------------------------------------------------------

def test_the_command_writes_the_file_and_prints_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRINGUP_STATE_DB", raising=False)
    design, ab, _top = _fat_tree()
    capture = tmp_path / "cap.txt"
    capture.write_text(ab.render())
    db = tmp_path / "state.db"
    with StateStore(db) as store:
        _disable(store, _ends(design, ab, "leaf-1-04-U36", "spine"))
    out = tmp_path / "etc" / "topology.conf"
    assert main(["topology", "--format", "slurm", "--discovered", str(capture), "--db", str(db),
                 "--output", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert payload["islands"] == ["leaf-1-04-U36"] and out.read_text() == payload["text"]
    assert "fabric: warning: leaf leaf-1-04-U36 has every uplink left out" in captured.err
    assert main(["topology", "--format", "rank-order", "--discovered", str(capture)]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[:2] == ["node-1-01", "node-1-02"]
    assert "no --site, --db or $BRINGUP_STATE_DB" in captured.err


def test_the_command_reports_a_bad_request_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "--format", "slurm"]) == 1
    err = capsys.readouterr().err
    assert err == "error: give either --discovered FILE (repeatable) or --live\n"


@needs_slurm
def test_slurmctld_reads_the_file_back_as_written(tmp_path: Path) -> None:
    """A real slurmctld 22.05 (sim/slurm/lab.py) loads the embedded site's topology.conf; `scontrol show topology`
    lists the rail leaf with every GPU host and the four spines above it."""
    t = load_slurm_topology(TopologyRequest(Inputs(site=SIM_SITE, discovered=(SIM_CAPTURE,)), db=tmp_path / "absent.db"),
                            lambda _w: None)
    hosts = tuple(p.host for p in t.hosts)
    lab = SlurmLab(tmp_path / "slurm", SlurmLabSpec("sim", hosts, (Partition("gpu", hosts, True),),
                                                    topology=topology_conf(t)))
    with lab.running(nodes=[]):
        shown = subprocess.run(["scontrol", "show", "topology"], capture_output=True, text=True, check=True,
                               timeout=30, env={**os.environ, **lab.env()}).stdout
        log = (tmp_path / "slurm" / "log" / "slurmctld.log").read_text()
    lines = {line.split()[0]: line for line in shown.splitlines() if line.startswith("SwitchName=")}
    assert "Nodes=gpu-r1-[01-08],gpu-r2-[01-08]" in lines["SwitchName=leaf-A-r3-U40"]
    assert "Level=0" in lines["SwitchName=leaf-A-r3-U40"]
    spines = [name for name in lines if name.startswith("SwitchName=spine-")]
    assert len(spines) == 4 and all("Level=1" in lines[n] and "Switches=leaf-A-r3-U40" in lines[n] for n in spines)
    assert "Multiple leaf switches" not in log and "lacks children" not in log
