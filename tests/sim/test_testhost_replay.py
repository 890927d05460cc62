"""The test hosts' replayed tools (sim/testhosts/replay.py): what the live health agent reads on a test host is
what it reads from the replay set (the stand-in's source: the captured H200 outputs of tests/fixtures/tools/replay,
tests/fixtures/tools/replay/README.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from provision.health.expectations import ENV_OVERLAY, load_overlay, render_expectations
from provision.site import load_site
from sim.sshhosts.faults import ToolFault
from sim.sshhosts.service import REPLAYED_EXPECTATIONS
from sim.testhosts import replay
from tools.health import catalog
from tools.health.collectors import cpu_governors, ib_sysfs, pcie_links
from tools.health.config import parse_config

REPO = Path(__file__).resolve().parents[2]
SETS = REPO / "tests" / "fixtures" / "tools" / "replay"
SIM_SITE = REPO / "inventory" / "sim" / "site.yml"


@pytest.mark.parametrize("name", ["hdr8-healthy", "hdr8-pcie-x4", "hdr8-ib-port-down", "h200x2-ib-healthy"])
def test_the_agents_collectors_read_the_written_sys_tree_back_as_the_capture(tmp_path: Path, name: str) -> None:
    replay.write_sysfs(SETS / name, tmp_path / "sys")
    for probe, collect in (("pcie-links", pcie_links), ("ib-sysfs", ib_sysfs), ("cpu-governor", cpu_governors)):
        assert collect(tmp_path)[0] == (SETS / name / f"{probe}.out").read_text(), (name, probe)


def test_every_command_probe_of_the_agent_has_a_shim_for_its_exact_invocation() -> None:
    site = load_site(SIM_SITE)
    host = site.host("gpu-r1-01")
    assert host is not None
    overlay = load_overlay(site, {ENV_OVERLAY: str(REPLAYED_EXPECTATIONS)})
    probes = catalog.probes(parse_config(render_expectations(site, host, "fast", overlay)))
    commands = {p.name: p.argv for p in probes.values() if p.argv}
    shimmed = {probe: (tool, *args.split()) for tool, table in replay.SHIMS.items() for args, probe in table.items()}
    assert shimmed == commands


def _run_shim(tmp_path: Path, tool: str, args: list[str], real: bool = True) -> subprocess.CompletedProcess[str]:
    """The shim with its absolute paths moved under tmp_path (the host's root)."""
    root = tmp_path / "root"
    text = replay.shim(tool).replace("/usr/local/bin /usr/sbin /usr/bin /sbin /bin", f"{root}/bin")
    text = text.replace(f"r=/{replay.REPLAY_DIR}", f"r={root}/{replay.REPLAY_DIR}")
    (root / "bin").mkdir(parents=True, exist_ok=True)
    if real:
        (root / "bin" / tool).write_text("#!/bin/sh\necho real \"$@\"\n")
        (root / "bin" / tool).chmod(0o755)
    shim = tmp_path / tool
    shim.write_text(text)
    return subprocess.run(["sh", str(shim), *args], capture_output=True, text=True, timeout=10, check=False)


def test_a_shim_serves_the_capture_hands_other_uses_to_the_real_tool_and_is_absent_before_its_package(
        tmp_path: Path) -> None:
    replay.copy_set(SETS / "hdr8-xid79", tmp_path / "root" / replay.REPLAY_DIR, {"nvidia-smi-topo-m": ToolFault.missing})
    served = _run_shim(tmp_path, "dmesg", ["-x"])
    assert served.returncode == 0 and served.stdout == (SETS / "hdr8-xid79" / "dmesg.out").read_text()
    assert "Xid" in served.stdout
    assert _run_shim(tmp_path, "dmesg", ["-T"]).stdout == "real -T\n"
    assert _run_shim(tmp_path, "nvidia-smi", ["topo", "-m"]).returncode == 127, "a missing capture: no such tool"
    absent = _run_shim(tmp_path / "bare", "nvidia-smi", ["-q"], real=False)
    assert absent.returncode == 127 and "not found" in absent.stderr


def test_tool_faults_change_the_hosts_copy_of_the_capture(tmp_path: Path) -> None:
    faults = {"nvidia-smi-q": ToolFault.truncate, "dmesg": ToolFault.hang, "df": ToolFault.empty}
    replay.copy_set(SETS / "hdr8-healthy", tmp_path, faults)
    full = (SETS / "hdr8-healthy" / "nvidia-smi-q.out").read_text()
    assert (tmp_path / "nvidia-smi-q.out").read_text() == full[: len(full) // 2]
    assert (tmp_path / "dmesg.rc").read_text().strip() == "timeout"
    assert (tmp_path / "df.out").read_text() == ""
