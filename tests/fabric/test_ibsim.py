"""The simulated site's fabric in ibsim, discovered by the real ibnetdiscover/iblinkinfo.

Each fault, injected through ibsim's console or by cabling the net file differently from the design,
comes back as exactly the matching finding; the clean fabric as none.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fabric.cli import main
from fabric.design import Design, Port
from fabric.diags import Attachment, Diags
from fabric.errors import DiscoveryError
from fabric.live import discover, run_ibnetdiscover
from fabric.pipeline import Result, run, topology_from_texts
from fabric.topology import NodeType
from sim.asbuilt import AsBuilt
from sim.ibfabric import IbFabric, IbsimError
from sim.ibfabric.diags_prefix import sim_diags
from tests.fabric.conftest import REPO, SIM_DESIGN
from tests.processes import alive, gone_within

pytestmark = pytest.mark.tools("ibsim", "ibnetdiscover")


def leaves(d: Design) -> list[str]:
    return [s.name for s in d.switches() if s.tier == 1]


def spines(d: Design) -> list[str]:
    return [s.name for s in d.switches() if s.tier == 2]


def validate_text(d: Design, *texts: str) -> Result:
    return run(d, topology_from_texts([(f"capture{i}", t) for i, t in enumerate(texts)]))


def findings(result: Result) -> list[str]:
    return [f.kind for f in result.report.findings]


def test_clean_fabric_and_console_unlink_relink(sim_design: Design) -> None:
    with IbFabric(sim_design) as fabric:
        assert fabric.healthy()
        clean = validate_text(sim_design, fabric.discover())
        assert findings(clean) == []
        # out of the box every switch says "Quantum Mellanox Technologies": all placed from the cabling
        assert {p.how for p in clean.identification.by_guid.values()} == {"description", "neighbours"}
        assert validate_text(sim_design, fabric.iblinkinfo()).report.findings == ()
        assert validate_text(sim_design, fabric.iblinkinfo(line_mode=True)).report.findings == ()
        assert findings(validate_text(sim_design, fabric.tool(["ibnetdiscover", "-p"]))) == []
        # the node-name-map we write is one OpenSM's tools accept: every switch shows its location
        nnm = fabric.workdir / "node-name-map"
        nnm.write_text(clean.identification.node_name_map(sim_design))
        renamed = fabric.tool(["ibnetdiscover", "--node-name-map", str(nnm)])
        assert all(f'"{s.name}"' in renamed for s in sim_design.switches())
        assert "Quantum Mellanox Technologies" not in renamed

        leaf, spine = leaves(sim_design)[2], spines(sim_design)[1]
        fabric.unlink(leaf, 26)
        [f] = validate_text(sim_design, fabric.discover()).report.findings
        assert f.kind == "missing_link" and {f.a.name, f.b.name} == {leaf, spine}  # type: ignore[union-attr]
        [g] = validate_text(sim_design, fabric.iblinkinfo()).report.findings
        assert g.kind == "port_down" and "Polling" in g.seen
        fabric.relink(leaf, 26)
        assert findings(validate_text(sim_design, fabric.discover())) == []
        pid = fabric.pid
    assert pid is not None and not alive(pid)


def _one(design: Design, faults: Callable[[AsBuilt], None], *, announced: Path | None = None,
         linkinfo: bool = False) -> Result:
    """`announced`: discovered as `fabric validate --live` does, from every attachment point the lab announces
    there that reaches a node not seen yet (fabric/live.py)."""
    with IbFabric(design, faults, state_file=announced) as fabric:
        if announced is not None:
            return validate_text(design, *(t for _, t in discover(30, Diags.from_file(announced)).captures))
        return validate_text(design, fabric.iblinkinfo() if linkinfo else fabric.discover())


def test_swapped_cables_in_the_net_file(sim_design: Design) -> None:
    leaf = leaves(sim_design)[0]
    [f] = _one(sim_design, lambda ab: ab.swap(Port(leaf, 3), Port(leaf, 4))).report.findings
    assert f.kind == "swapped" and {f.a.port, f.b.port} == {3, 4}  # type: ignore[union-attr]


def test_uplink_on_the_wrong_spine(sim_design: Design) -> None:
    s0, s1 = spines(sim_design)[:2]
    result = _one(sim_design, lambda ab: ab.swap(Port(s0, 7), Port(s1, 12)))
    assert findings(result) == ["swapped"]


def test_host_cable_on_the_wrong_port(sim_design: Design) -> None:
    leaf = leaves(sim_design)[5]
    [f] = _one(sim_design, lambda ab: ab.move(Port(leaf, 9), Port(leaf, 19))).report.findings
    assert f.kind == "miswired" and f.a is not None and f.a.name == "gpu-r2-01/mlx5_5"


def test_width_1_on_both_ends(sim_design: Design) -> None:
    leaf = leaves(sim_design)[1]
    [f] = _one(sim_design, lambda ab: ab.degrade(Port(leaf, 30), width="1X")).report.findings
    assert f.kind == "degraded" and f.seen.startswith("trained at 1X HDR")


def test_link_trained_at_edr_on_an_hdr_design(sim_design: Design) -> None:
    leaf = leaves(sim_design)[3]
    [f] = _one(sim_design, lambda ab: ab.degrade(Port(leaf, 2), speed="EDR")).report.findings
    assert f.kind == "degraded" and "EDR" in f.seen


def test_missing_spine(sim_design: Design) -> None:
    spine = spines(sim_design)[3]
    [f] = _one(sim_design, lambda ab: ab.remove_node(spine)).report.findings
    assert f.kind == "missing_device" and f.a is not None and f.a.name == spine


def test_unknown_hca(sim_design: Design) -> None:
    leaf = leaves(sim_design)[6]

    def rogue(ab: AsBuilt) -> None:
        ab.add_node("rogue", NodeType.CA, 1, "lab-laptop mlx5_0", 0xB8599F03DEAD0000)
        ab.plug(Port(leaf, 20), Port("rogue", 1))

    [f] = _one(sim_design, rogue).report.findings
    assert f.kind == "unknown_device" and f.a is not None and f.a.description == "lab-laptop mlx5_0"


def test_partitioned_spine_tier_seen_from_every_part(sim_design: Design, tmp_path: Path) -> None:
    ls, ss = leaves(sim_design), spines(sim_design)

    def split(ab: AsBuilt) -> None:
        for i, leaf in enumerate(ls):
            for port in range(21, 41):
                peer = ab.plugs.get(Port(leaf, port))
                if peer is not None and (peer[0].node in ss[2:]) != (i >= 4):
                    ab.unplug(Port(leaf, port))

    [f] = _one(sim_design, split, announced=tmp_path / "ibfabric.json").report.findings
    assert f.kind == "partition"
    assert [p["size"] for p in f.details["parts"]] == [71, 70]  # type: ignore[index]


def test_duplicate_guid_set_on_the_console(sim_design: Design) -> None:
    with IbFabric(sim_design) as fabric:
        fabric.set_guid("gpu-r2-03/mlx5_1", fabric.asbuilt.nodes["gpu-r1-02/mlx5_6"].guid)
        [f] = validate_text(sim_design, fabric.discover()).report.findings
    assert f.kind == "duplicate_guid" and f.details["hidden_devices"]


def test_performance_counters_set_on_the_console(sim_design: Design) -> None:
    leaf = leaves(sim_design)[0]
    with IbFabric(sim_design) as fabric:
        fabric.perf_set(leaf, 5, "SymbolErrorCounter", 1234)
        # no SM runs, so there are no LID routes: query the switch from the switch itself
        out = fabric.tool(["perfquery", str(fabric.asbuilt.nodes[leaf].lid), "5"], attach=leaf)
    assert "SymbolErrorCounter:..............1234" in out.replace(" ", "")


def test_fabric_validate_live_on_the_running_sim(sim_design: Design, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "ibfabric.json"
    with IbFabric(sim_design, state_file=state) as fabric:
        assert json.loads(state.read_text())["socket"] == fabric.socket
        assert main(["validate", "--design", str(SIM_DESIGN), "--live", "--ib-diags", str(state),
                     "--timeout", "30", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["summary"]["clean"] is True
        fabric.unlink(leaves(sim_design)[0], 1)
        assert main(["validate", "--design", str(SIM_DESIGN), "--live", "--ib-diags", str(state)]) == 2
    assert not state.exists()
    assert main(["validate", "--design", str(SIM_DESIGN), "--live", "--ib-diags", str(state)]) == 1


def test_ibsim_dies_with_its_parent(tmp_path: Path) -> None:
    script = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from fabric.design import load_design\n"
        "from sim.ibfabric import IbFabric\n"
        f"f = IbFabric(load_design(Path({str(SIM_DESIGN)!r})), workdir=Path({str(tmp_path)!r}))\n"
        "f.start()\n"
        "print(f.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout is not None
    pid = int(proc.stdout.readline())
    assert alive(pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert gone_within(pid, 5)


@pytest.mark.slow
def test_imbue_scale_fabric_runs_in_ibsim_and_validates_clean() -> None:
    import dataclasses

    from fabric.generate import generate_fat_tree
    from tests.fabric.test_design import IMBUE_PARAMS

    # Debian's ibsim 0.10 knows no NDR: the Imbue-scale cabling, trained at HDR
    design = generate_fat_tree(dataclasses.replace(IMBUE_PARAMS, speed="HDR"))
    with IbFabric(design, timeout_s=120) as fabric:  # 4,408 nodes: past ibsim's default -N/-S/-P limits
        result = validate_text(design, fabric.discover())
    assert findings(result) == []
    assert result.report.summary["switches"] == {"designed": 320, "discovered": 320, "placed": 320}


def test_lab_service_runs_the_sites_fabric_for_validate_live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from provision.site import load_site
    from sim.ibfabric.service import services
    from sim.lab import Lab, LabContext
    from tests.fabric.test_cli import _site_with_design

    site = load_site(_site_with_design(tmp_path))
    run_dir = site.directory / "state" / "lab"  # where `python -m sim up` runs the site's lab
    [svc] = services(LabContext(site=site, run_dir=run_dir, secrets={}))
    monkeypatch.delenv("BRINGUP_IB_DIAGS", raising=False)
    with Lab([svc], run_dir).running_lab() as lab:
        state = lab.exports()["BRINGUP_IB_DIAGS"]
        pid = json.loads(Path(state).read_text())["pid"]
        # found without the variable: the site's lab state
        assert main(["validate", "--site", str(site.path), "--live", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["summary"]["clean"] is True
        monkeypatch.setenv("BRINGUP_IB_DIAGS", state)
        assert main(["validate", "--site", str(site.path), "--live"]) == 0
    assert not alive(pid)


def test_a_tool_killed_at_its_timeout_leaves_no_fake_sysfs_where_it_was_run_from(
    sim_design: Design, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # umad2sim builds ./sys-<pid> in the tool's working directory and removes it only on a normal exit;
    # killed at its timeout, ibnetdiscover leaves it (seen in a checkout's root after a loaded `sim up`).
    # 5 ms: a whole discovery of this fabric once finished within 30 ms in a CI run.
    caller = tmp_path / "caller"
    caller.mkdir()
    monkeypatch.chdir(caller)
    with IbFabric(sim_design) as fab:
        with pytest.raises(DiscoveryError, match="did not finish"):
            run_ibnetdiscover(sim_diags(fab.socket), Attachment("sim", None), 0.005)
        fab.timeout_s = 0.005
        with pytest.raises(IbsimError, match="did not finish"):
            fab.discover()
    assert list(caller.iterdir()) == []
