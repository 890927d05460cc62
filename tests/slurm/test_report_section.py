"""`provision report`'s Slurm section: node standings from the last sync, the job Slurm ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from report import gather, render_html
from tests.slurm.conftest import SlurmRig, needs_slurm


def test_a_store_no_sync_touched_says_not_run(tmp_path: Path) -> None:
    from provision.state import StateStore

    store = StateStore(tmp_path / "s.db")
    section = gather("t", store, tmp_path, None).slurm
    assert not section.ran and section.nodes is None and not section.job
    assert "no slurm-job.json" in section.job_source


@needs_slurm
def test_the_report_shows_each_hosts_standing_and_the_job(rig: SlurmRig, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    rig.set_all("golden")
    rig.store.mark("gpu-r1-03", "failed", reason="xid_79")
    rig.sync(capsys=capsys)
    (tmp_path / "slurm-job.json").write_text(json.dumps({"job_id": 7, "state": "COMPLETED", "requeues": 1}))
    report = gather("sim", rig.store, tmp_path, None)
    assert report.slurm.ran and dict(report.slurm.standings) == {"available": 15, "drained": 1}
    assert report.slurm.nodes is not None and report.slurm.nodes.rows[0][0] == "gpu-r1-03"  # out of service first
    assert dict(report.slurm.job)["requeues"] == "1"
    page = render_html(report)
    assert 'id="slurm"' in page and "bringup: xid_79 (" in page and '<a href="#host-gpu-r1-03">' in page
