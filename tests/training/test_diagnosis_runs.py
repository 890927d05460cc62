"""The MFU diagnosis on real 4-rank gloo runs of the tiny model (one layer, 16 tokens a step), faults injected
through the job's own seam (TRAINING_INJECT, training/inject.py; deterministic: stall steps come from a
generator seeded by the rank), each rank standing in for its own host (TRAINING_HOST=gpu-0{local_rank}).
The stall is 2 s: a 0.6 s stall left no anomaly at all in CI's run of dd54a43 (2 cores, beside the suite's
other worker). Here, with three such runs at once and two busy loops, steps took ~0.1 s and a 0.6 s stall step
was ~0.14 of the level; once load bursts make more than 5% of the steps drop, the classifier keeps only drops
below a tenth of it, which such a stall is not and a 2 s one is.

Rare stalls on one rank: random stalls on the stalling host. Not here (training/README.md says why): a clean
500-step run without alerts, growing garbage with the GC controller off (a GC decline) and the controller curing
it, one rank's collectives 40% slower: on the shared, loaded CPU the neighbours' load decided them more than the
job did (the GC decline passed alone and failed beside the suite's other worker). The clean run, the decline and
its cure are pinned instead on real runs recorded on an H200 and replayed through the classifier
(tests/training/test_diagnosis_recorded.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.training.conftest import torchrun

ARGS = ["--config", "tiny-slice1", "--synthetic", "--seq-len", "16", "--micro-batch", "1", "--warmup-steps", "2",
        "--log-every", "100"]


def _run(run: Path, store: Path, steps: int, inject: str, *extra: str) -> list[dict[str, object]]:
    torchrun([*ARGS, "--run-dir", str(run), "--steps", str(steps), *extra], nproc=4, timeout=300,
             env={"TRAINING_BREAKDOWN_EVERY": "25", "TRAINING_HOST": "gpu-0{local_rank}", "TRAINING_INJECT": inject,
                  "TRAINING_EXPECTED_STORE": str(store)})
    path = run / "anomalies.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _alerts(rows: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(r["kind"], r["hosts"]) for r in rows if r["alert"]]


@pytest.mark.slow
def test_rare_stalls_on_one_rank_name_its_host(tmp_path: Path) -> None:
    rows = _run(tmp_path / "stalls", tmp_path / "expected.json", 150, "stall:3:0.03:2.0",
                "--checkpoint-every", "50")  # stall steps 6, 22, 64, 75 (rank 3's seeded generator)
    assert [h for k, h in _alerts(rows) if k == "random_stalls"] == [["gpu-03"]], rows
    stalls = next(r for r in rows if r["kind"] == "random_stalls" and r["alert"])
    assert stalls["steps"][0] == 6 and stalls["steps"][1] in (64, 75)  # type: ignore[index]
    assert stalls["evidence"]["named_by_breakdown"]["gpu-03"] >= 3  # type: ignore[index]
