from __future__ import annotations

from pathlib import Path

import pytest
import torch

from training.configs import TrainConfig, tiny
from training.data import Batch, PackedLoader
from training.tokenizer import load_tokenizer


def _rows(corpus: Path, tok: Path, n: int) -> list[Batch]:
    from training.data import discover_files

    loader = PackedLoader.fresh(discover_files([corpus]), load_tokenizer(tok), 64, 1, 0, 1, seed=0,
                                split_documents=False)
    return [loader.next_batch()[0] for _ in range(n)]


def _cat(rows: list[Batch]) -> Batch:
    return Batch(*(torch.cat([getattr(r, f) for r in rows]) for f in ("input_ids", "labels", "position_ids",
                                                                       "doc_ids")))


def test_two_micro_batches_make_the_same_step_as_one_batch_of_two(gloo_group: None, corpus: Path,
                                                                  tokenizer_path: Path) -> None:
    """Padding differs per row, so this also checks the loss is a mean over labelled tokens of the
    whole step, not a mean of per-micro-batch means."""
    from training.engines.fsdp import FsdpEngine

    rows = _rows(corpus, tokenizer_path, 4)
    assert any(int((r.labels == -100).sum()) > 0 for r in rows)
    cfg = TrainConfig(seq_len=64, warmup_steps=0, lr=1e-2)
    results = []
    for batches in ([_cat(rows[0:2]), _cat(rows[2:4])], [rows[0], rows[1], rows[2], rows[3]]):
        torch.manual_seed(0)
        engine = FsdpEngine(tiny(), cfg, torch.device("cpu"))
        first = engine.train_step(batches[: len(batches) // 2], 1e-2)
        second = engine.train_step(batches[len(batches) // 2:], 1e-2)
        results.append((first, second))
    (a1, a2), (b1, b2) = results
    assert b1[0] == pytest.approx(a1[0], rel=1e-5) and b1[1] == pytest.approx(a1[1], rel=1e-4)
    assert b2[0] == pytest.approx(a2[0], rel=1e-4)  # after an update: the updates were the same too
