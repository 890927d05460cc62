"""The per-rank breakdown in a real 4-rank gloo run of the tiny model: one rank's compute slowed 10x from the
start (TRAINING_INJECT) is the rank everyone waits for, named with its host, and the diagnosis alerts on it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.training.conftest import torchrun


def test_one_rank_slowed_ten_times_is_named_by_the_breakdown_and_the_diagnosis(tmp_path: Path) -> None:
    run = tmp_path / "run"
    torchrun(["--config", "tiny", "--run-dir", str(run), "--synthetic", "--seq-len", "32", "--micro-batch", "1",
              "--steps", "30", "--warmup-steps", "2", "--checkpoint-every", "0", "--log-every", "10"], nproc=4,
             env={"TRAINING_BREAKDOWN_EVERY": "10", "TRAINING_INJECT": "compute:2:10", "TRAINING_HOST": "gpu-sim",
                  "TRAINING_EXPECTED_STORE": str(tmp_path / "expected.json")})
    windows = [json.loads(line) for line in (run / "breakdown.jsonl").read_text().splitlines()]
    assert [w["steps"] for w in windows] == [[1, 10], [11, 20], [21, 30]]
    for w in windows:
        assert w["waited_for"]["rank"] == 2 and w["waited_for"]["host"] == "gpu-sim"
        assert w["waited_for"]["busy_ratio"] > 4
        fast = [r for r in w["ranks"] if r["rank"] != 2]
        assert all(r["comm_s"] > w["ranks"][2]["comm_s"] for r in fast)  # the others wait in collectives
    found = [json.loads(line) for line in (run / "anomalies.jsonl").read_text().splitlines()]
    assert [(a["kind"], a["hosts"], a["evidence"]["rank"]) for a in found if a["alert"]] == \
        [("straggler", ["gpu-sim"], 2)]
    assert 'kind="straggler",host="gpu-sim"' in (run / "training_anomaly.prom").read_text()
    assert not (tmp_path / "expected.json").exists()  # an alerted run teaches no expectation
