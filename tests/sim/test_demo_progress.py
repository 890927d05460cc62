"""The demo's live progress view (sim/demo_progress.py), rendered from a recorded sequence of state snapshots."""

from __future__ import annotations

import io

from rich.console import Console

from sim.demo_progress import render, round_trips, stage_view

DEPLOYED = frozenset({"deployed"})
# Snapshots of three hosts as site.yml's stage saw them: at its start, mid-run, at its end.
START = {"a": ("deployed", None), "b": ("deployed", None), "c": ("failed", "bmc_auth")}
MID = {"a": ("configured", None), "b": ("deployed", None), "c": ("failed", "bmc_auth")}
END = {"a": ("configured", None), "b": ("failed", "site_x"), "c": ("failed", "bmc_auth")}


def _text(table: object) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=120, color_system=None).print(table)
    return buffer.getvalue()


def test_a_running_stage_counts_hosts_done_failed_and_still_in_progress() -> None:
    mid = stage_view("site.yml", 12.0, START, MID, DEPLOYED, running=True)
    assert (mid.done, mid.failed, mid.in_progress) == (1, 0, 1)  # c failed earlier: not this stage's
    end = stage_view("site.yml", 20.0, START, END, DEPLOYED, running=False)
    assert (end.done, end.failed, end.in_progress) == (1, 1, 0)


def test_the_live_table_shows_finished_stages_and_the_running_one_last() -> None:
    harvest = stage_view("harvest", 4.6, {"a": ("declared", None)}, {"a": ("macs_harvested", None)},
                         frozenset({"declared"}), running=False)
    running = stage_view("site.yml", 12.0, START, MID, DEPLOYED, running=True)
    lines = [line for line in _text(render([harvest, running], 12)).splitlines() if "│" in line]
    assert "stage 2/12" in _text(render([harvest, running], 12))
    assert "ok 1" in lines[0] and "harvest" in lines[0] and lines[0].split("│")[-2].strip() == "-"
    cells = [c.strip() for c in lines[1].split("│")[1:-1]]
    assert cells == ["> 2", "site.yml", "12", "1", "0", "1"]


def test_a_host_failed_and_put_back_within_the_stage_is_named_with_its_reason() -> None:
    """The firmware stage: the inventory fails a drifted host, the apply puts it back; its state at the end is the one
    it started with, so only the stage's failed events tell it left and came back."""
    failures = [("a", "firmware_drift"), ("c", "bmc_auth"), ("b", "bios_drift")]
    now = {"a": ("healthy", None), "b": ("failed", "bios_drift"), "c": ("failed", "bmc_auth")}
    assert round_trips(failures, now) == {"a": "firmware_drift"}  # b and c are still failed
