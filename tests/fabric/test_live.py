"""Live discovery on this host: which local RDMA devices it runs `ibnetdiscover` from (a fake sysfs), and
what one failing attachment point does to the run (a fake `ibnetdiscover` on PATH)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fabric.cli import main
from fabric.design import Design
from fabric.errors import DiscoveryError
from fabric.live import discover, local_attachments
from sim.asbuilt import AsBuilt
from tests.fabric.conftest import REPO, SIM_DESIGN


def _hca(sys_ib: Path, name: str, guid: str, *ports: tuple[str, str]) -> None:
    """One device of /sys/class/infiniband: node_guid and, per port, link_layer and state as the kernel writes."""
    (sys_ib / name).mkdir(parents=True)
    (sys_ib / name / "node_guid").write_text(":".join(guid[i:i + 4] for i in range(0, 16, 4)) + "\n")
    for n, (layer, state) in enumerate(ports, start=1):
        port = sys_ib / name / "ports" / str(n)
        port.mkdir(parents=True)
        (port / "link_layer").write_text(layer + "\n")
        (port / "state").write_text(state + "\n")


@pytest.fixture()
def host(sim_design: Design, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A GPU host's sysfs: a RoCE bond, an HCA whose port is down, an HCA that cannot reach the fabric
    (its ibnetdiscover fails) and one cabled to the sim fabric (gpu-r1-01/mlx5_0) whose port 2 is active."""
    ab = AsBuilt.from_design(sim_design)
    capture = tmp_path / "capture.txt"
    capture.write_text(ab.render(only=ab.reachable("gpu-r1-01/mlx5_0")))
    sys_ib = tmp_path / "sys" / "class" / "infiniband"
    _hca(sys_ib, "mlx5_0", "b8599f03ffff0000", ("InfiniBand", "4: ACTIVE"))
    _hca(sys_ib, "mlx5_1", "b8599f03ffff0010", ("InfiniBand", "1: DOWN"))
    _hca(sys_ib, "mlx5_4", ab.guid_of("gpu-r1-01/mlx5_0"), ("InfiniBand", "2: INIT"), ("InfiniBand", "4: ACTIVE"))
    _hca(sys_ib, "mlx5_bond_0", "b8599f03ffff0020", ("Ethernet", "4: ACTIVE"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "ibnetdiscover"
    tool.write_text(f"""#!/bin/sh
echo "$@" >> {tmp_path / 'calls'}
if [ "$2" = mlx5_4 ]; then cat {capture}; exit 0; fi
echo "ibwarn: [4242] _do_madrpc: recv failed: Connection timed out" >&2
echo "src/ibnetdisc.c:811; Failed to resolve self" >&2
exit 1
""")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("BRINGUP_IB_DIAGS", raising=False)
    return sys_ib


def test_only_hcas_with_an_active_infiniband_port_are_attachment_points(host: Path) -> None:
    points, notes = local_attachments(host)
    assert [p.command("ibnetdiscover") for p in points] == [["ibnetdiscover", "-C", "mlx5_0", "-P", "1"],
                                                            ["ibnetdiscover", "-C", "mlx5_4", "-P", "2"]]
    assert notes == ["live discovery: mlx5_1 not used, no ACTIVE InfiniBand port (port 1 InfiniBand DOWN)"]


def test_no_active_infiniband_port_is_an_error_naming_every_device(tmp_path: Path) -> None:
    _hca(tmp_path, "mlx5_1", "b8599f03ffff0010", ("InfiniBand", "1: DOWN"))
    _hca(tmp_path, "mlx5_bond_0", "b8599f03ffff0020", ("Ethernet", "4: ACTIVE"))
    with pytest.raises(DiscoveryError, match=r"no HCA on this host has an ACTIVE InfiniBand port: "
                                             r"mlx5_1 \(port 1 InfiniBand DOWN\); mlx5_bond_0 \(port 1 Ethernet"):
        local_attachments(tmp_path)


def test_one_failing_hca_is_a_warning_when_another_discovers_the_fabric(host: Path, tmp_path: Path) -> None:
    found = discover(5.0, sys_ib=host)
    assert [label for label, _text in found.captures] == ["mlx5_4"]
    [down, failed] = found.warnings
    assert "mlx5_1 not used" in down
    assert failed.startswith("live discovery: ibnetdiscover from mlx5_0 failed (rc 1): src/ibnetdisc.c:811; "
                             "Failed to resolve self") and failed.endswith("(the fabric was discovered from mlx5_4)")
    assert (tmp_path / "calls").read_text().splitlines() == ["-C mlx5_0 -P 1", "-C mlx5_4 -P 2"]


def test_when_every_hca_fails_discovery_is_an_error(host: Path) -> None:
    (host / "mlx5_4" / "ports" / "2" / "state").write_text("1: DOWN\n")
    with pytest.raises(DiscoveryError, match="ibnetdiscover from mlx5_0 failed"):
        discover(5.0, sys_ib=host)


def test_validate_live_reports_the_failed_hca_and_validates_the_rest(host: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("fabric.live.SYS_IB", host)
    assert main(["validate", "--design", str(SIM_DESIGN), "--live", "--json"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)["summary"]
    assert summary["clean"] is True and summary["warning_count"] == 2
    assert any("ibnetdiscover from mlx5_0 failed" in w for w in summary["warnings"])
    assert err.count("fabric: warning: live discovery:") == 2 and "mlx5_0 failed" in err


# The simulated fabric comes in as a real site's tools do: the announcement `$BRINGUP_IB_DIAGS` names (printed by
# `python -m sim env`) or the one beside the site file (`SitePaths.ib_diags`); fabric/live.py knows no lab layout.

def test_live_discovery_knows_no_simulator_layout() -> None:
    source = (REPO / "fabric" / "live.py").read_text(encoding="utf-8")
    for sim_detail in ('"lab"', "ibfabric", "sim up", "import sim", "from sim"):
        assert sim_detail not in source


def test_the_tools_announcement_beside_the_site_is_found_and_read(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from fabric.diags import Diags, announced_for_site
    from provision.site.index import load_index
    from tests.sites import copy_sim_site

    monkeypatch.delenv("BRINGUP_IB_DIAGS", raising=False)
    site = copy_sim_site(tmp_path)
    assert announced_for_site(site) is None and Diags.for_site(site).attachments is None
    announced = load_index(site).paths.ib_diags
    announced.parent.mkdir(parents=True, exist_ok=True)
    announced.write_text(json.dumps({"prefix": ["/opt/run-diags"], "env": {"SOCK": "sock-1"}, "pid": os.getpid(),
                                     "attach": [{"label": "sim:S-1", "guid": "0x1", "env": {"HOST": "S-1"}}]}))
    assert announced_for_site(site) == announced
    diags = Diags.for_site(site)
    [point] = diags.attachments or ()
    assert (point.label, diags.environ(point)) == ("sim:S-1", {"SOCK": "sock-1", "HOST": "S-1"})
    assert diags.argv(["ibnetdiscover"], point) == ["/opt/run-diags", "ibnetdiscover"]


@pytest.mark.tools("ibsim", "ibnetdiscover")
def test_the_labs_fabric_is_validated_live_through_the_variable_sim_env_prints(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from provision.site import load_site
    from sim.ibfabric.service import services
    from sim.lab import Lab, LabContext
    from sim.site_paths import lab_run_dir
    from tests.fabric.test_cli import _site_with_design

    site = load_site(_site_with_design(tmp_path))
    printed = subprocess.run([sys.executable, "-m", "sim", "env", "--site", str(site.path)], cwd=REPO,
                             capture_output=True, text=True, timeout=300, check=True).stdout
    exported = dict(line.removeprefix("export ").split("=", 1) for line in printed.splitlines())
    state = exported["BRINGUP_IB_DIAGS"].strip("'")
    assert Path(state) == site.paths.ib_diags
    [svc] = services(LabContext(site=site, run_dir=lab_run_dir(site.paths), secrets={}))
    monkeypatch.setenv("BRINGUP_IB_DIAGS", state)
    with Lab([svc], lab_run_dir(site.paths)).running_lab():
        assert main(["validate", "--design", str(SIM_DESIGN), "--live", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["summary"]["clean"] is True
    assert not Path(state).exists()
