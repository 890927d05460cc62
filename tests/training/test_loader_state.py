from __future__ import annotations

import json
from pathlib import Path

from training.data import LoaderState, PackedLoader, discover_files, rank_segments, reshard_states
from training.tokenizer import load_tokenizer


def _lines(files: list[Path]) -> dict[tuple[str, int], str]:
    """(path, byte offset) -> line, for every non-empty line."""
    out = {}
    for f in files:
        off = 0
        for raw in f.read_bytes().splitlines(keepends=True):
            out[(str(f), off)] = raw.decode()
            off += len(raw)
    return out


def test_ranks_share_out_every_line_exactly_once(corpus: Path) -> None:
    files = discover_files([corpus])
    owned: list[tuple[str, int]] = []
    for rank in range(3):
        for seg in rank_segments(files, rank, 3, seed=5, epoch=0):
            off = seg.offset
            with open(seg.path, "rb") as f:
                f.seek(off)
                while off < seg.end:
                    owned.append((seg.path, off))
                    off += len(f.readline())
    assert sorted(owned) == sorted(_lines(files))


def test_resume_from_saved_state_seeks_to_the_same_bytes_and_batches(corpus: Path, tokenizer_path: Path) -> None:
    files = discover_files([corpus])
    tok = load_tokenizer(tokenizer_path)
    a = PackedLoader.fresh(files, tok, 64, 2, rank=1, world=2, seed=3)
    for _ in range(7):
        _, state = a.next_batch()
    saved = json.loads(json.dumps(state.to_json()))  # what a checkpoint stores
    expected = [a.next_batch()[0] for _ in range(3)]
    b = PackedLoader(files, tok, 64, 2, LoaderState.from_json(saved))
    assert b.state.segments[0].offset == saved["segments"][0]["offset"]
    got = [b.next_batch()[0] for _ in range(3)]
    for x, y in zip(expected, got, strict=True):
        assert x.input_ids.equal(y.input_ids) and x.labels.equal(y.labels)


def test_epoch_rolls_over_with_a_new_file_order(corpus: Path, tokenizer_path: Path) -> None:
    files = discover_files([corpus])
    tok = load_tokenizer(tokenizer_path)
    loader = PackedLoader.fresh(files, tok, 128, 4, rank=0, world=1, seed=1)
    for _ in range(60):
        _, state = loader.next_batch()
    assert state.epoch >= 1


def test_reshard_after_losing_a_rank_reads_the_rest_once(corpus: Path, tokenizer_path: Path) -> None:
    files = discover_files([corpus])
    tok = load_tokenizer(tokenizer_path)
    states = []
    for rank in range(3):
        loader = PackedLoader.fresh(files, tok, 32, 1, rank=rank, world=3, seed=9)
        for _ in range(rank + 2):
            _, st = loader.next_batch()
        states.append(st)
    remaining = sorted((s.path, s.offset, s.end) for st in states for s in st.segments if s.end > s.offset)
    new = reshard_states(states, files, 2)
    assert [s.world for s in new] == [2, 2] and [s.rank for s in new] == [0, 1]
    pieces = sorted((s.path, s.offset, s.end) for st in new for s in st.segments)
    # same bytes, cut at line starts, nothing twice
    total_old = sum(e - o for _, o, e in remaining)
    assert sum(e - o for _, o, e in pieces) == total_old
    for path, off, _ in pieces:
        assert off == 0 or Path(path).read_bytes()[off - 1:off] == b"\n"
    split_carried = {(s.path, s.offset): s.skip_tokens for st in states for s in st.segments if s.skip_tokens}
    for (path, off), skip in split_carried.items():
        assert any(s.path == path and s.offset == off and s.skip_tokens == skip for st in new for s in st.segments)


def test_a_checkpoint_counts_once_every_shard_and_the_metadata_are_written(tmp_path: Path) -> None:
    from training.checkpoint import ExtraState, latest_complete, mark_complete, write_extra

    root = tmp_path / "checkpoints"
    state = LoaderState(0, 0, 0, 2)
    for step in (10, 20):
        for rank in (0, 1):
            write_extra(root / f"step_{step:08d}", rank, ExtraState(step, state, "", None, "fsdp", 2))
    mark_complete(root, root / "step_00000010", keep=3)
    assert latest_complete(root) == root / "step_00000010"
    (root / "step_00000020" / ".metadata").write_bytes(b"x")  # DCP finished; the job died before marking
    assert latest_complete(root) == root / "step_00000020"
    (root / "step_00000020" / "extra_rank1.json").unlink()  # a rank's state missing: not usable
    assert latest_complete(root) == root / "step_00000010"
