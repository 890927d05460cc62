"""The nightly job's pure parts and the history table: resume at the unfinished stage, per-link history."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from fabric.burnin.history import FlowRow, History, LinkRow, PortRow
from fabric.burnin.nightly import choose_stages, flags, hostfile_hosts, parse_budget, prometheus
from provision.state import StateStore

PLAN = {"stages": [[{"src": "a", "dst": "b", "links": ["x", "y"]}], [{"src": "b", "dst": "a", "links": ["z"]}]],
        "links": [{"link": "x"}, {"link": "y"}, {"link": "z"}]}


def _row(run: int, night: str, link: str, gbps: float | None, errors: int = 0, verdict: str = "pass") -> LinkRow:
    return LinkRow(run, night, link, f"name {link}", verdict, gbps, errors, "", float(run))


def test_a_run_killed_mid_stage_resumes_at_that_stage_and_keeps_what_finished(tmp_path: Path) -> None:
    history = History(StateStore(tmp_path / "s.db"))
    run, done = history.open_run(PLAN, 5, False)
    assert done == frozenset()
    history.finish_stage(run, 1, 0.0, [FlowRow(1, "a", "b", "a/0", "b/0", 196.0, "ok", "")],
                         [PortRow(1, "g", 3, "symbol_errors", 4, "ok", "")])
    # the process dies in stage 2; the next invocation of the same plan finds the run and stage 1 done
    again, done = History(StateStore(tmp_path / "s.db")).open_run(PLAN, 5, False)
    assert (again, done) == (run, frozenset({1}))
    assert History(StateStore(tmp_path / "s.db")).open_run(PLAN, 6, False)[0] != run  # other options: new run
    history.finish_run(run)
    assert history.open_run(PLAN, 5, False)[0] != run  # a finished run is not resumed
    assert [f.gbps for f in history.flows(run)] == [196.0] and history.ports(run)[0].delta == 4


def test_budget_hostfile_and_rotation_put_the_longest_unburned_links_first() -> None:
    assert parse_budget("2h") == 7200 and parse_budget("90m") == 5400
    with pytest.raises(ValueError):
        parse_budget("soon")
    assert hostfile_hosts("gpu-1 slots=8\n# idle\ngpu-2:8\n\ngpu-3\n") == {"gpu-1", "gpu-2", "gpu-3"}
    history = {"x": [_row(1, "2026-12-01", "x", 196.0)], "y": [_row(1, "2026-12-01", "y", 196.0)]}
    stages, due = choose_stages(PLAN, history, date(2026, 12, 2), cycle=7, fits=1)
    assert stages == [2] and due == []  # z was never burned: its stage goes first
    stages, due = choose_stages(PLAN, {}, date(2026, 12, 2), cycle=7, fits=1)
    assert stages == [1] and due == ["z"]  # the budget leaves a due link out, and says so


def test_a_link_slower_than_its_own_history_or_with_new_errors_is_flagged_and_exported() -> None:
    history = {"x": [_row(1, "2026-11-30", "x", 196.0), _row(2, "2026-12-01", "x", 197.0),
                     _row(3, "2026-12-02", "x", 180.0)],
               "y": [_row(3, "2026-12-02", "y", 196.0, errors=3)]}
    tonight = [history["x"][-1], history["y"][-1]]
    found = {(f.link, f.why.split(" ")[1]) for f in flags(tonight, history)}
    assert ("x", "Gb/s,") in found and ("y", "new") in found
    text = prometheus(history, flags(tonight, history), date(2026, 12, 4))
    assert 'bringup_burnin_link_gbps{link="x",name="name x"} 180' in text
    assert 'bringup_burnin_link_nights_since_burned{link="x",name="name x"} 2' in text
    parser = pytest.importorskip("prometheus_client.parser")
    families = {f.name: f for f in parser.text_string_to_metric_families(text)}
    assert families["bringup_burnin_link_errors"].samples[1].value == 3
