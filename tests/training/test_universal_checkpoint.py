"""DeepSpeed ZeRO-3 on another world size through DeepSpeed's universal checkpoints (ds_to_universal,
`load_universal_checkpoint`): a checkpoint written by 4 gloo ranks resumes on 2 with `--resize-batch keep`
(each rank runs two old ranks' data streams), so the resumed steps see the uninterrupted run's batches
and give its losses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.training.conftest import step_records, tiny_args, torchrun


def test_a_zero3_checkpoint_of_4_ranks_resumes_on_2_with_the_same_batches_and_losses(
        corpus: Path, tokenizer_path: Path, tmp_path: Path) -> None:
    straight = tmp_path / "straight"
    torchrun(tiny_args(corpus, tokenizer_path, straight, 4, ckpt_every=2, engine="deepspeed"), nproc=4)
    resumed = tmp_path / "resumed"
    (resumed / "checkpoints").mkdir(parents=True)
    shutil.copytree(straight / "checkpoints" / "step_00000002", resumed / "checkpoints" / "step_00000002")
    r = torchrun([*tiny_args(corpus, tokenizer_path, resumed, 4, ckpt_every=2, engine="deepspeed"),
                  "--resize-batch", "keep"], nproc=2)
    assert "saved by 4 ranks, now 2" in r.stderr
    a, b = step_records(straight), step_records(resumed)
    assert sorted(b) == [3, 4]
    # measured: 6.0210462 / 6.0210466 and 5.9177389 / 5.9177327 (sums in another order)
    assert b[3]["loss"] == pytest.approx(a[3]["loss"], abs=1e-5)  # same weights, same batch
    assert b[4]["loss"] == pytest.approx(a[4]["loss"], rel=1e-4)  # same Adam moments: the same update
    assert (resumed / "checkpoints" / "step_00000002" / "universal" / "zero" / "optimizer_state.pt").is_file()
    extra = json.loads((resumed / "checkpoints" / "step_00000004" / "extra_rank1.json").read_text())
    assert [s["rank"] for s in extra["loader"]["streams"]] == [2, 3]


def test_keep_batch_gives_each_new_rank_whole_old_streams_and_the_old_size_its_own_back() -> None:
    from training.data import LoaderState
    from training.elastic import StreamsState, plan_data

    old = [LoaderState(0, 0, r, 4, rows=10 + r) for r in range(4)]
    halves = [plan_data(old, 2, r, keep_batch=True).streams for r in (0, 1)]
    assert [[s.rank for s in h] for h in halves] == [[0, 1], [2, 3]]
    assert plan_data(old, 3, 0, keep_batch=True).reshard == old  # 3 does not divide 4: dealt out again
    assert plan_data(old, 2, 0, keep_batch=False).reshard == old
    saved = [StreamsState(0, 0, r, 2, [], 0, h) for r, h in enumerate(halves)]  # what the 2-rank run saves
    assert [plan_data(saved, 4, r, keep_batch=True).state for r in range(4)] == old
    assert [s.rank for s in plan_data(saved, 1, 0, keep_batch=True).streams] == [0, 1, 2, 3]
