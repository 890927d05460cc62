"""The MFU diagnosis replayed over real runs recorded on the lent H200 (2026-12-02, `bench/diagnosis_gpu.py`: the
job's own torchrun, one GPU, the tiny model, synthetic tokens; tests/fixtures/training/diagnosis_h200_2026-12-02/).

Each run's samples are rebuilt as the job's watch makes them (a step's start after its data, to the next step's)
from the recorded metrics (each step's end time, step and data seconds), its checkpoints from the recorded
checkpoint events, the stalls from its breakdown.jsonl; the classifier runs after every gather (25 steps) as in
the job, each new (kind, hosts) counted once. Recorded data: deterministic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.diagnosis.classify import Anomaly, RankView, Sample, classify

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "training" / "diagnosis_h200_2026-12-02"
GATHER = 25  # TRAINING_BREAKDOWN_EVERY of the recorded runs


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _num(v: object) -> float:
    assert isinstance(v, int | float), v
    return float(v)


def replay(name: str) -> list[Anomaly]:
    rows = _rows(RUNS / name / "metrics.jsonl")
    steps = [r for r in rows if r["event"] == "step"]
    saved = {int(_num(r["step"])) for r in rows if r["event"] == "checkpoint"}
    begin = [_num(r["time"]) - _num(r["step_seconds"]) + _num(r["data_seconds"]) for r in steps]
    samples = [Sample(int(_num(r["step"])), begin[i + 1] - begin[i], int(_num(r["step"])) in saved)
               for i, r in enumerate(steps[:-1])]
    windows = _rows(RUNS / name / "breakdown.jsonl")
    found: dict[tuple[str, tuple[str, ...]], Anomaly] = {}
    for at in range(GATHER, len(steps) + 1, GATHER):
        stalls = [(int(s["step"]), str(s["host"])) for w in windows if w["steps"][1] <= at  # type: ignore[index]
                  for s in w["stalls"]]  # type: ignore[attr-defined]
        for a in classify([s for s in samples if s.step < at], None, RankView(("h200-0",), stalls=stalls)):
            found.setdefault((a.kind, a.hosts), a)
    return list(found.values())


def alerts(found: list[Anomaly]) -> list[tuple[str, tuple[str, ...]]]:
    return sorted((a.kind, a.hosts) for a in found if a.alert)


@pytest.fixture(scope="module")
def clean() -> list[Anomaly]:
    return replay("clean")


def test_the_clean_500_step_h200_run_raises_no_alert(clean: list[Anomaly]) -> None:
    assert len(_rows(RUNS / "clean" / "metrics.jsonl")) >= 500
    assert alerts(clean) == []


def test_the_clean_runs_checkpoint_steps_are_labelled_checkpoint(clean: list[Anomaly]) -> None:
    ckpt = next(a for a in clean if a.kind == "checkpoint")
    assert not ckpt.alert and 100 in ckpt.steps and ckpt.evidence["min_ratio"] < 0.5


def test_growing_garbage_with_gc_off_on_the_h200_is_a_gc_decline() -> None:
    found = replay("gc_off")
    assert alerts(found) == [("gc_decline", ())]
    q = next(a for a in found if a.kind == "gc_decline").evidence["quarters"]
    assert q[3] <= 0.85 * q[0]


def test_the_gc_controller_cures_the_same_garbage_on_the_h200() -> None:
    assert alerts(replay("gc_on")) == []


def test_rare_stalls_on_the_h200_are_random_stalls_naming_its_host() -> None:
    found = replay("stalls")
    assert alerts(found) == [("random_stalls", ("h200-0",))]
    stalls = next(a for a in found if a.alert)
    assert stalls.evidence["events"] >= 3 and stalls.steps[0] == 23
