"""The MFU pattern classifier on synthetic series shaped like Imbue's (step times with 3% noise, checkpoint
drops, the patterns of their write-up), the breakdown windows it reads, and where a diagnosis goes."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

from training.breakdown import Window
from training.diagnosis.classify import Anomaly, Evidence, Expected, RankView, Sample, classify
from training.diagnosis.expected import LearnedStore
from training.diagnosis.report import AnomalySink, read_anomalies

HOSTS = ["gpu-01", "gpu-02", "gpu-03", "gpu-04"]
STEP = 0.1  # the healthy step, seconds


def series(n: int = 500, shape: Callable[[int], float] = lambda i: 1.0, ckpt_every: int = 100, seed: int = 1,
           ckpt_slowdown: float = 10.0) -> list[Sample]:
    """Step i's wall time: the healthy step / shape(i) (shape = instant MFU over expected), 3% noise; a
    checkpoint every `ckpt_every` steps makes that step `ckpt_slowdown` x slower."""
    rng = random.Random(seed)
    out = []
    for i in range(1, n + 1):
        ckpt = ckpt_every > 0 and i % ckpt_every == 0
        wall = STEP / shape(i) * rng.gauss(1.0, 0.03) * (ckpt_slowdown if ckpt else 1.0)
        out.append(Sample(i, wall, ckpt))
    return out


def healthy_ranks(windows: int = 10) -> RankView:
    return RankView(HOSTS, [None] * windows, [0.06] * windows, [0.04] * windows)


def alerts(found: list[Anomaly]) -> list[Anomaly]:
    return [a for a in found if a.alert]


def test_a_clean_500_step_run_raises_no_alert_and_labels_its_checkpoints() -> None:
    for seed in range(5):
        found = classify(series(seed=seed), Expected(STEP, 0.06, 0.04), healthy_ranks())
        assert alerts(found) == []
        assert [a.kind for a in found] == ["checkpoint"]
        assert found[0].steps == (100, 200, 300, 400, 500)


def test_checkpoint_aligned_drops_without_an_expectation_are_labelled_not_alerted() -> None:
    found = classify(series(ckpt_every=25), None)
    assert [(a.kind, a.alert) for a in found] == [("checkpoint", False)]


def test_regular_drops_off_checkpoints_are_labelled_periodic() -> None:
    samples = [Sample(s.step, s.wall_s * (8 if s.step % 40 == 0 else 1)) for s in series(ckpt_every=0)]
    found = classify(samples, Expected(STEP))
    assert [(a.kind, a.alert) for a in found] == [("periodic_drops", False)]
    assert found[0].evidence["every"] == 40


def test_one_rank_ten_times_slower_is_the_straggler_on_its_host() -> None:
    view = RankView(HOSTS, [(2, 9.6)] * 10, [0.6] * 10, [0.55] * 10)
    found = alerts(classify(series(shape=lambda i: 0.1, ckpt_every=0), Expected(STEP, 0.06, 0.04), view))
    assert [(a.kind, a.hosts) for a in found] == [("straggler", ("gpu-03",))]
    assert found[0].evidence["rank"] == 2 and found[0].evidence["level_of_expected"] < 0.15


def test_collectives_forty_percent_slower_name_the_host_whose_hca_counters_rose() -> None:
    exp = Expected(STEP, 0.06, 0.04)
    view = RankView(HOSTS, [None] * 10, [0.06] * 10, [0.056] * 10)  # every rank waits 40% longer
    ev = Evidence(port_counters={"gpu-02": {"symbol_error": 412, "link_downed": 1}, "gpu-01": {"symbol_error": 0}})
    found = alerts(classify(series(shape=lambda i: 0.1 / 0.116, ckpt_every=0), exp, view, ev))
    assert [(a.kind, a.hosts) for a in found] == [("slow_collectives", ("gpu-02",))]
    assert found[0].evidence["comm_ratio"] == 1.4


def test_random_rare_stalls_name_the_host_the_breakdown_saw_stall() -> None:
    rng = random.Random(7)
    stall_steps = sorted(rng.sample(range(30, 500), 6))
    samples = [Sample(s.step, s.wall_s * (6 if s.step in stall_steps else 1)) for s in series(ckpt_every=0)]
    view = RankView(HOSTS, [None] * 10, [0.06] * 10, [0.04] * 10, [(s, "gpu-04") for s in stall_steps])
    found = alerts(classify(samples, Expected(STEP, 0.06, 0.04), view))
    assert [(a.kind, a.hosts, a.steps) for a in found] == [("random_stalls", ("gpu-04",), tuple(stall_steps))]


def test_stalls_no_rank_is_named_for_are_not_alerted() -> None:
    samples = [Sample(s.step, s.wall_s * (6 if s.step in (77, 301, 420) else 1)) for s in series(ckpt_every=0)]
    found = classify(samples, Expected(STEP), healthy_ranks())
    assert [(a.kind, a.alert) for a in found] == [("random_stalls", False)]


def test_a_slow_decline_is_garbage_collection() -> None:
    found = alerts(classify(series(shape=lambda i: 1.0 - 0.4 * i / 500), Expected(STEP)))
    assert [a.kind for a in found] == ["gc_decline"] and "GC controller" in found[0].evidence["remedy"]


def test_good_then_often_seventy_percent_is_clock_throttling_on_hosts_with_clock_events() -> None:
    rng = random.Random(3)
    throttled = {i for i in range(120, 501) if rng.random() < 0.4}
    ev = Evidence(health={"gpu-03": {"gpu_clock_events": "clock_slowdown"}, "gpu-01": {"nvidia_peermem": "x"}})
    found = alerts(classify(series(shape=lambda i: 0.7 if i in throttled else 1.0), Expected(STEP), None, ev))
    assert [(a.kind, a.hosts) for a in found] == [("clock_throttling", ("gpu-03",))]


def test_flat_levels_name_the_link_gdr_and_degraded_patterns_with_their_evidence() -> None:
    ev = Evidence(health={"gpu-02": {"nvidia_peermem": "peermem_not_loaded"}},
                  port_counters={"gpu-04": {"port_rcv_errors": 90}})
    def flat(level: float) -> Anomaly:
        return alerts(classify(series(shape=lambda i: level), Expected(STEP), None, ev))[0]

    got = {level: flat(level) for level in (0.1, 0.3, 0.7)}
    assert (got[0.1].kind, got[0.1].hosts) == ("dead_link_or_pcie_x4", ("gpu-04",))
    assert (got[0.3].kind, got[0.3].hosts) == ("gdr_broken", ("gpu-02",))
    assert got[0.3].evidence["nvidia_peermem"] == {"gpu-02": "peermem_not_loaded"}
    assert (got[0.7].kind, got[0.7].hosts) == ("degraded_link_or_cpu", ("gpu-04",))
    assert alerts(classify(series(shape=lambda i: 0.7), None, None, ev)) == []  # no expectation: no level


def test_a_window_names_the_rank_the_others_wait_for_and_the_stalls_of_one_rank() -> None:
    steps = list(range(1, 11))
    step_s = [[1.0] * 10 for _ in HOSTS]
    comm = [[0.9] * 10, [0.9] * 10, [0.0] * 10, [0.9] * 10]  # rank 2 is busy the whole step, the rest wait
    comm[3][4] = 0.3  # rank 3 stalls at step 5: busy 0.7 against its usual 0.1
    win = Window(steps, HOSTS, step_s, [[0.0] * 10 for _ in HOSTS], comm)
    rank, ratio = win.straggler() or (None, 0.0)
    assert rank == 2 and ratio > 9
    assert [(s, r) for s, r, _ in win.stalls()] == [(5, 3)]
    assert win.summary()["waited_for"]["host"] == "gpu-03"


def test_a_diagnosis_goes_to_the_log_the_textfile_and_the_anomaly_file_once(tmp_path: Path) -> None:
    sink = AnomalySink(tmp_path, "job-a")
    a = Anomaly("straggler", True, ("gpu-03",), (6, 99), 0.1, {"rank": 2})
    label = Anomaly("checkpoint", False, (), (100,), 1.0, {})
    assert sink.emit([a, label]) == [a, label]
    assert sink.emit([a]) == []
    prom = (tmp_path / "training_anomaly.prom").read_text()
    assert 'training_anomaly{job="job-a",kind="straggler",host="gpu-03"} 1.0' in prom and "checkpoint" not in prom
    rows = read_anomalies(tmp_path)
    assert [(r["kind"], r["alert"], r["hosts"]) for r in rows] == [("straggler", True, ["gpu-03"]),
                                                                    ("checkpoint", False, [])]


def test_the_first_healthy_run_sets_the_expectation_and_later_ones_keep_it(tmp_path: Path) -> None:
    store = LearnedStore(tmp_path / "expected.json")
    assert store.learn("tiny|fsdp|cpu|4", [0.1] * 30, [0.06] * 3, [0.04] * 3) == Expected(0.1, 0.06, 0.04)
    assert store.learn("tiny|fsdp|cpu|4", [0.5] * 30, [], []) is None
    assert store.get("tiny|fsdp|cpu|4") == Expected(0.1, 0.06, 0.04)
    assert json.loads((tmp_path / "expected.json").read_text())["tiny|fsdp|cpu|4"]["step_s"] == 0.1
