"""What `provision report` gathers, on the demo's own state (the session's one demo run) and on the files
other tools leave in the run directory: `--json` is the page's data, the funnel and the failed hosts agree
with `provision status`, the fabric map carries the ledger's disabled links and the burn-in's failures, and
absent or broken Ethernet / training results say so instead of inventing anything."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from provision.cli import main as provision_main
from provision.site.loader import load_site
from provision.state import StateStore
from report import as_json, gather, render_html
from report.gather_files import ETHERNET_FILE, ethernet, training
from sim.demo_training import RUN_NAME, StageSettings, load_settings
from tests.demo_run import DemoRun


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    capsys.readouterr()
    assert provision_main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_report_json_is_the_pages_data_and_agrees_with_status(demo_run: DemoRun,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    db = demo_run.site.parent / "state" / "lab" / "demo.db"
    common = ("--site", str(demo_run.site), "--db", str(db))
    data = _run(capsys, "report", "--json", *common)
    status = _run(capsys, "status", "--json", *common)
    site = load_site(demo_run.site)
    with StateStore(db) as store:
        again = json.loads(json.dumps(as_json(gather(site.name, store, db.parent, site.fabric_design, site=site))))
    assert {k: v for k, v in data.items() if k != "generated"} == {k: v for k, v in again.items() if k != "generated"}

    assert data["hosts"] == status["hosts"] == 17
    for rack in data["funnel"]:
        golden = next(s["hosts"] for s in rack["stages"] if s["state"] == "golden")
        assert rack["golden"] == status["by_rack"][rack["rack"]].get("golden", 0)
        # the funnel counts how far hosts got: a golden host lost later (the training stage's) still reached it
        lost = [f for f in data["failed"] if f["rack"] == rack["rack"]
                and any(h["to_state"] == "golden" for h in f["history"])]
        assert golden == rack["golden"] + len(lost)
        assert rack["failed"] == status["by_rack"][rack["rack"]].get("failed", 0)
    failed = {f["host"]: f for f in data["failed"]}
    assert set(failed) == {f["host"] for f in status["failed"]}
    for host in failed.values():
        assert host["remediation"] and host["history"][-1]["to_state"] == "failed"
    assert failed["gpu-r1-03"]["reason"] == "xid_79" and "Xid" in failed["gpu-r1-03"]["remediation"]
    assert "1X" in failed["gpu-r1-02"]["detail"]

    health = {row["host"]: row for row in data["health"]["rows"]}
    xid = data["health"]["checks"].index("gpu_xid")
    assert health["gpu-r1-03"]["cells"][xid]["status"] == "critical"
    assert health["gpu-r1-01"]["cells"][xid]["status"] == "ok"
    assert "gpu-r2-03" in data["health"]["not_checked"]  # failed at the BMC, never health-checked

    fabric = data["fabric"]
    assert fabric["tiers"] == ["host-leaf", "leaf-spine"] and len(fabric["switches"]) == 12
    assert {d["state"] for d in fabric["disabled"]} == {"disabled"} and len(fabric["disabled"]) == 3
    disabled_lines = [lk for lk in fabric["links"] if lk["status"] == "disabled"]
    assert {lk["b"] for lk in disabled_lines} <= {"rack r1", "rack r2"} and len(disabled_lines) == 3
    assert any(lk["status"] == "fail" and "gpu-r1-02/mlx5_3" in lk["detail"] for lk in fabric["links"])
    assert fabric["validation"].startswith("fabric validate --json: ")
    burnin = data["burnin"]
    assert burnin["run"] == 1 and dict(burnin["counts"])["fail"] >= 2
    assert burnin["links"][0]["verdict"] == "fail"  # worst first
    _assert_demo_training(data["training"], db.parent / RUN_NAME, load_settings(demo_run.site.parent))
    _assert_demo_firmware(data["firmware"])
    with StateStore(db) as store:
        page = render_html(gather(site.name, store, db.parent, site.fabric_design, site=site))
    assert '<section id="firmware">' in page and "22.31.10.10 (wanted &gt;= 22.36.10.10)" in page


def _assert_demo_firmware(firmware: dict) -> None:  # type: ignore[type-arg]
    """The demo's firmware stage (sim/demo_firmware.py): the fleet's versions per component beside the baseline, the
    baseline's BIOS attributes as the hosts hold them, and each drift with the fix that followed it."""
    assert firmware["ran"] and firmware["on_baseline"] == firmware["inventoried"] >= 15
    kinds = {c["kind"]: c for c in firmware["components"]}
    assert kinds["nic"]["baseline"] == ">= 22.36.10.10" and kinds["nic"]["off"] == []
    assert [v for v, _ in kinds["nic"]["versions"]] == ["22.36.10.10"]  # gpu-r2-04's 22.31.10.10 is gone
    assert kinds["hca"]["baseline"] == "20.39.2048" and kinds["psu"]["baseline"] == ""  # the baseline pins no PSU
    bios = {b["attribute"]: b for b in firmware["bios"]}
    assert bios["SysProfile"]["wanted"] == "PerfOptimized" and [v for v, _ in bios["SysProfile"]["values"]] == [
        "PerfOptimized"]
    moves = [(e["host"], e["command"], e["to_state"], e["reason"]) for e in firmware["events"]
             if e["host"] in ("gpu-r1-01", "gpu-r2-04")]
    assert moves == [("gpu-r1-01", "firmware-inventory", "failed", "bios_drift"),
                     ("gpu-r2-04", "firmware-inventory", "failed", "firmware_drift"),
                     ("gpu-r2-04", "firmware-apply", "configured", ""),
                     ("gpu-r1-01", "bios-apply", "configured", "")]
    fixed = next(e for e in firmware["events"] if e["command"] == "firmware-apply")
    assert "nic: 22.31.10.10 -> >= 22.36.10.10 via SimpleUpdate (firmware/nic-22.36.10.10.bin)" in fixed["detail"]


def _assert_demo_training(training: dict, run: Path, settings: StageSettings) -> None:  # type: ignore[type-arg]
    """The demo's training stage (sim/demo_training.py): its loss and MFU per step and its supervisor's restart."""
    assert training["ran"] and training["source"] == str(run / "metrics.jsonl")
    assert training["steps"] == settings.steps and len(training["loss"]) == len(training["mfu"]) == settings.steps
    assert all(0 < p["value"] < 1 for p in training["mfu"]), "MFU against the CPU's measured matmul rate"
    job = [line.split()[0] for line in (run / "job.txt").read_text().splitlines()]
    assert settings.lose_host is not None
    [restart] = training["restarts"]
    assert restart["dropped"] == [[job[settings.lose_host.job_host - 1], "unknown"]] and restart["added"]


def test_an_absent_ethernet_check_is_shown_as_not_run_and_a_present_one_as_it_is(tmp_path: Path) -> None:
    absent = ethernet(tmp_path)
    assert not absent.ran and ETHERNET_FILE in absent.source
    (tmp_path / ETHERNET_FILE).write_text("{not json")
    broken = ethernet(tmp_path)
    assert not broken.ran and "unreadable" in broken.source
    # A stand-in of our own making: `provision ethernet check --json` is being written beside this; the
    # reader takes any object (its scalars as facts, its lists of objects as tables), so no schema is assumed.
    doc = {"site": "sim", "ok": False, "summary": {"hosts": 2, "checks": [{"host": "a", "status": "ok"}]},
           "findings": [{"host": "gpu-r1-01", "port": "eno1", "seen": "1000Mb/s", "expected": "25000Mb/s"}]}
    (tmp_path / ETHERNET_FILE).write_text(json.dumps(doc))
    present = ethernet(tmp_path)
    assert present.ran and ("ok", "false") in present.facts and ("summary.hosts", "2") in present.facts
    assert [t.title for t in present.tables] == ["summary: checks", "findings"]
    assert present.tables[1].rows == (("gpu-r1-01", "eno1", "1000Mb/s", "25000Mb/s"),)


def _step(rank: int, step: int, loss: float, mfu: float | None) -> dict[str, object]:
    """A step row as training/joblog.py's JobMetricsWriter writes it (StepRecord's fields after its own)."""
    return {"schema": 1, "event": "step", "time": 1.0 + step, "rank": rank, "world": 2, "slow_total": 0,
            "step": step, "loss": loss, "grad_norm": 1.0, "lr": 3e-4, "step_seconds": 0.5, "tokens": 4096,
            "tokens_per_s_per_gpu": 8192.0, "mfu": mfu, "mem_allocated_gb": 1.0, "mem_peak_gb": 2.0, "slow": False}


def test_the_training_reader_takes_rank_zero_steps_and_survives_torn_and_foreign_lines(tmp_path: Path) -> None:
    assert not training(tmp_path).ran and "metrics.jsonl" in training(tmp_path).source
    job = tmp_path / "train" / "run-1"
    job.mkdir(parents=True)
    rows = [{"schema": 1, "event": "built", "rank": 0, "world": 2, "engine": "fsdp2", "model": "tiny"}]
    for step in range(1, 6):
        rows += [_step(0, step, 10.0 / step, 0.4 + step / 100), _step(1, step, 99.0, 0.9)]
    rows.append(_step(0, 6, 1.5, math.nan))
    text = "\n".join(json.dumps(r) for r in rows) + '\n["not", "a", "row"]\n{"event": "step", "ste'
    (job / "metrics.jsonl").write_text(text)
    got = training(tmp_path)
    assert got.ran and got.steps == 6 and got.source == str(job / "metrics.jsonl")
    assert [p.value for p in got.loss] == [10.0, 5.0, 10.0 / 3, 2.5, 2.0, 1.5]
    assert [p.step for p in got.mfu] == [1, 2, 3, 4, 5]  # NaN MFU is not a point
    assert got.events[0][0] == "built" and "fsdp2" in got.events[0][1]


def test_the_supervisors_restarts_beside_the_job_log_are_read_and_a_job_without_them_says_so(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text(json.dumps(_step(0, 1, 5.0, 0.3)) + "\n")
    assert training(tmp_path).restarts == () and "not run under the supervisor" in training(tmp_path).supervisor
    rows = [{"event": "start", "attempt": 0, "hosts": ["a", "b"]},
            {"event": "restart", "attempt": 1, "cause": "degraded", "kind": "straggler", "failed": {},
             "dropped": {"b": "suspect"}, "added": ["c"], "checkpoint": "step_00000010", "resume_step": 10},
            {"event": "restart", "attempt": 2, "cause": "failed", "failed": {"a": 137}, "dropped": {}, "added": []}]
    (tmp_path / "supervisor.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"event": "rest')
    got = training(tmp_path)
    assert [(r.attempt, r.cause, r.dropped, r.added, r.resume_step) for r in got.restarts] == [
        (1, "degraded straggler", (("b", "suspect"),), ("c",), 10), (2, "failed", (), (), None)]
    assert got.restarts[1].failed == (("a", "137"),) and got.supervisor == str(tmp_path / "supervisor.jsonl")


def test_a_run_directory_with_nothing_renders_every_section_with_what_is_missing(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "empty.db")
    store.sync_site([("gpu-1", "r1")])
    page = render_html(gather("empty", store, tmp_path, None))
    store.close()
    for said in ("Not run: no ethernet-check.json", "No training run: no metrics.jsonl",
                 "No burn-in run in the state store", "No health result in the state store",
                 "The site declares no fabric design", "fabric validate not run",
                 "is recorded in this state store", "No host was moved by a baseline step"):
        assert said in page


def test_what_peers_said_is_shown_as_text_never_as_markup(tmp_path: Path) -> None:
    hostile = '<script>alert(1)</script><img src=x onerror="fetch(1)">'
    store = StateStore(tmp_path / "s.db")
    store.sync_site([("gpu-1", "r1")])
    store.fail("gpu-1", "bmc_auth", command="harvest-macs", evidence={"detail": hostile, "bmc_messages": [hostile]})
    (tmp_path / ETHERNET_FILE).write_text(json.dumps({"note": hostile, "ports": [{"seen": hostile}]}))
    page = render_html(gather("s", store, tmp_path, None))
    store.close()
    assert hostile not in page and "<script" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_real_job_jsonl_gives_its_loss_and_mfu_curves(tmp_path: Path) -> None:
    """The job file of the 1B real-data run on one H200 (2026-12-01, training/README.md's figures)."""
    real = Path(__file__).parents[1] / "fixtures/training/real_data_2026-12-01/llama3_1b_job_real_metrics.jsonl"
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "metrics.jsonl").write_bytes(real.read_bytes())
    got = training(tmp_path)
    steps = [json.loads(line) for line in real.read_text().splitlines() if '"event": "step"' in line]
    assert got.ran and got.steps == len(steps) == 10
    assert [p.value for p in got.loss] == [s["loss"] for s in steps]
    assert [p.value for p in got.mfu] == [s["mfu"] for s in steps if s["mfu"] is not None]
    assert all(0 < p.value < 1 for p in got.mfu) and [k for k, _ in got.events] == ["plan", "built", "finished"]


def test_a_site_of_many_racks_gets_one_racks_by_states_funnel(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "racks.db")
    store.sync_site([(f"gpu-{r}-{h}", f"r{r:02d}") for r in range(1, 9) for h in (1, 2)])
    store.fail("gpu-3-1", "bmc_auth", command="harvest-macs", evidence={"detail": "HTTP 401"})
    page = render_html(gather("racks", store, tmp_path, None))
    store.close()
    assert page.count('aria-label="lifecycle funnel: racks by states"') == 1
    assert "lifecycle funnel of rack" not in page  # no chart per rack
    assert all(f">rack r0{r}</text>" in page for r in range(1, 9)) and '<a href="#failed">' in page
