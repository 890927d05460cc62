"""The lab's tool prefix (sim/ibfabric/run-diags): the one place the simulator's own notice is dropped. ibsim's
libumad stand-in prints `ibwarn: [11064] sim_connect: attached as client 0 at node "Spine1"` on stderr each time
a tool attaches (ibsim's umad2sim/sim_client.c; the line as tutorials running smpquery and opensm under ibsim
show it); the tool's own stderr, stdout and exit status pass through untouched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sim.ibfabric.diags_prefix import run_sim_tool


def test_the_prefix_drops_the_simulators_notice_and_keeps_the_tools_own_output(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "ibsim-run"  # stands in for ibsim-utils' wrapper, which execs the tool with the preload
    fake.write_text('#!/bin/sh\necho "ibwarn: [$$] sim_connect: attached as client 4 at node \\"$SIM_HOST\\"" >&2\n'
                    'echo "ibwarn: [42] mad_rpc: _do_madrpc failed; dport (DR path slid 0)" >&2\n'
                    'echo "tool said: $*"\nexit 3\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    proc = run_sim_tool(["ibportstate", "-D", "0,1", "5", "query"], {"SIM_HOST": "S-1"}, 10)
    assert proc.returncode == 3
    assert proc.stdout == "tool said: ibportstate -D 0,1 5 query\n"
    assert proc.stderr == "ibwarn: [42] mad_rpc: _do_madrpc failed; dport (DR path slid 0)\n"
