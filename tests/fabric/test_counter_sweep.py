"""The one live counter sweep (fabric/counter_sweep.py), used by the port plan and the burn-in: switches read
concurrently but never more than the bound at once, and a switch that fails, hangs or prints garbage is that
switch's ports unknown, never zero and never an abort of the sweep. The answers are the real perfquery's
(tests/fixtures/fabric/ports/ibsim/perfquery-before.txt, captured against ibsim), one switch's blocks each."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from fabric.counter_sweep import sweep_switches
from fabric.diags import Diags
from fabric.errors import FabricError
from fabric.ports.site_run import PortsSite, live_sweep
from fabric.topology import End
from tests.fabric.ports.helpers import IBSIM

CAPTURE = (IBSIM / "perfquery-before.txt").read_text()


def _blocks_of(lid: int) -> str:
    """The capture's blocks for one LID: what `perfquery -l <lid> 255` prints for that switch."""
    blocks = ("\n" + CAPTURE.split("\n", 1)[1]).split("\n# Port ")
    return "".join("# Port " + b + "\n" for b in blocks if b.split(" port ")[0].endswith(f"Lid {lid}"))


def test_a_failing_or_garbled_switch_is_unknown_and_the_others_are_read() -> None:
    calls: list[Sequence[str]] = []

    async def run(argv: Sequence[str], timeout_s: float) -> str:
        calls.append(argv)
        lid = int(argv[argv.index("-l") + 1])
        if lid == 2:
            raise FabricError("perfquery -l 2 255 did not answer within 1 s")
        return "garbled\n" if lid == 3 else _blocks_of(lid)

    read = asyncio.run(sweep_switches(run, [("aa", 1), ("bb", 2), ("cc", 3)], 1.0))
    assert read.failed == {"bb": "perfquery -l 2 255 did not answer within 1 s",
                           "cc": "perfquery for LID 3 printed 1 unreadable line(s)"}
    assert {e.guid for e in read.values} == {"aa"} and read.values[End("aa", 5)]["symbol_errors"] == 40
    assert all("-x" not in argv for argv in calls)  # error counters only unless data is asked for
    sweep = read.as_sweep()
    assert sweep.complete and not sweep.by_lid and End("aa", 5) in sweep.values
    assert [r.reason for r in sweep.rejected] == ["switch 0xbb: perfquery -l 2 255 did not answer within 1 s",
                                                  "switch 0xcc: perfquery for LID 3 printed 1 unreadable line(s)"]


def test_switches_are_read_concurrently_within_the_bound() -> None:
    running = [0, 0]  # now, most

    async def run(argv: Sequence[str], timeout_s: float) -> str:
        running[0] += 1
        running[1] = max(running)
        await asyncio.sleep(0.01)
        running[0] -= 1
        return _blocks_of(1)

    read = asyncio.run(sweep_switches(run, [(f"{n:02x}", 1) for n in range(20)], 1.0, data=True, concurrency=4))
    assert running[1] == 4 and not read.failed and len({e.guid for e in read.values}) == 20


def test_a_port_sweep_goes_on_past_a_switch_that_cannot_be_read(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # before, one failing perfquery aborted `fabric ports apply --sweep` as a whole
    (tmp_path / "lid1.txt").write_text(_blocks_of(1))
    tool = tmp_path / "site-prefix"
    tool.write_text(f'#!/bin/sh\ncase "$*" in *"-l 1 255"*) cat {tmp_path}/lid1.txt;; '
                    '*) echo "ibwarn: _do_madrpc: recv failed" >&2; exit 1;; esac\n')
    tool.chmod(0o755)
    site: Any = SimpleNamespace(diags=Diags(prefix=(str(tool),)), attach=None)
    sweep = asyncio.run(live_sweep(cast(PortsSite, site), {"aa": 1, "bb": 2}, timeout_s=5.0))
    assert {e.guid for e in sweep.values} == {"aa"}
    [why] = [r.reason for r in sweep.rejected]
    assert why == "switch 0xbb: perfquery -l 2 255 failed (rc 1): ibwarn: _do_madrpc: recv failed"
