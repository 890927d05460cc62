"""prepare-data: deterministic token shards (same bytes twice, any number of workers) with a
manifest; BOS/EOS from the tokenizer's config; long documents split; the loader resumes exactly."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from training.data import LoaderState, discover_files
from training.prepared import PreparedLoader, ZerosLoader, prepare, read_manifest, reshard_prepared, specials
from training.tokenizer import EOS, load_tokenizer


def _bytes(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.fixture(scope="module")
def prepared(corpus: Path, tokenizer_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("prepared")
    prepare(tokenizer_path, discover_files([corpus]), out, workers=2, max_doc_tokens=64)
    return out


def test_same_bytes_twice_and_for_any_number_of_workers(prepared: Path, corpus: Path, tokenizer_path: Path,
                                                        tmp_path: Path) -> None:
    prepare(tokenizer_path, discover_files([corpus]), tmp_path / "one", workers=1, max_doc_tokens=64)
    assert _bytes(tmp_path / "one") == _bytes(prepared)
    m = read_manifest(prepared, verify=True)
    assert len(m["shards"]) == len(discover_files([corpus])) and m["total_tokens"] > 0
    shutil.copytree(prepared, tmp_path / "bad")
    with open(tmp_path / "bad" / "shard_00000.bin", "r+b") as f:
        f.write(b"\xff\xff\xff\xff")
    with pytest.raises(ValueError, match="checksum"):
        read_manifest(tmp_path / "bad", verify=True)


def test_documents_end_in_eos_and_long_ones_are_split(prepared: Path, tokenizer_path: Path, corpus: Path) -> None:
    tok = load_tokenizer(tokenizer_path)
    eos = tok.token_to_id(EOS)
    m = read_manifest(prepared)
    starts = np.fromfile(prepared / "shard_00000.idx", dtype="<i8")
    tokens = np.fromfile(prepared / "shard_00000.bin", dtype="<u4")
    assert starts[-1] == len(tokens) == m["shards"][0]["tokens"]
    lengths = np.diff(starts)
    assert lengths.max() <= 64 and (lengths == 64).any()  # split at max_doc_tokens
    # every document's last piece ends with EOS: as many EOS as source documents
    src = discover_files([corpus])[0]
    docs = sum(1 for line in src.read_bytes().splitlines() if line.strip())
    assert int((tokens == eos).sum()) == docs
    assert m["bos"] is None and m["eos"] == eos  # no tokenizer_config.json: no BOS


def test_bos_and_eos_follow_tokenizer_config(tokenizer_path: Path, tmp_path: Path) -> None:
    shutil.copyfile(tokenizer_path, tmp_path / "tokenizer.json")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<|pad|>", "eos_token": {"content": EOS}, "add_bos_token": True}))
    tok = load_tokenizer(tmp_path / "tokenizer.json")
    sp = specials(tmp_path / "tokenizer.json", tok)
    assert (sp.bos, sp.eos) == (tok.token_to_id("<|pad|>"), tok.token_to_id(EOS))


def test_resume_from_a_saved_state_gives_the_same_batches(prepared: Path) -> None:
    straight = PreparedLoader.fresh_prepared(prepared, 128, 2, rank=1, world=2, seed=7)
    batches = [straight.next_batch() for _ in range(6)]
    state = LoaderState.from_json(json.loads(json.dumps(batches[2][1].to_json())))
    resumed = PreparedLoader(prepared, 128, 2, state)
    for want, _ in batches[3:]:
        got, _ = resumed.next_batch()
        assert torch.equal(got.input_ids, want.input_ids) and torch.equal(got.labels, want.labels)
        assert torch.equal(got.position_ids, want.position_ids)
    other = PreparedLoader.fresh_prepared(prepared, 128, 2, rank=0, world=2, seed=7).next_batch()[0]
    assert not torch.equal(other.input_ids, batches[0][0].input_ids)  # ranks read different documents


def _docs(states: list[LoaderState]) -> list[tuple[str, int]]:
    return [(g.path, d) for st in states for g in st.segments for d in range(g.offset, g.end)]


def test_resharding_to_a_new_world_size_deals_each_unread_document_once_and_continues_exactly(
        prepared: Path) -> None:
    old = [PreparedLoader.fresh_prepared(prepared, 128, 2, rank=r, world=2, seed=7) for r in (0, 1)]
    states = [[ld.next_batch() for _ in range(3)][-1][1] for ld in old]
    new = reshard_prepared(states, 3)
    assert [(s.rank, s.world, s.epoch) for s in new] == [(0, 3, 0), (1, 3, 0), (2, 3, 0)]
    left, dealt = _docs(states), _docs(new)
    assert sorted(dealt) == sorted(left) and len(set(dealt)) == len(dealt)  # none lost, none twice
    shares = [len(_docs([s])) for s in new]
    assert max(shares) - min(shares) <= 1
    in_progress = {(g.path, g.offset, g.skip_tokens) for st in states for g in st.segments if g.skip_tokens}
    assert in_progress and in_progress == {(g.path, g.offset, g.skip_tokens) for st in new for g in st.segments
                                           if g.skip_tokens}
    want, _ = old[0].next_batch()  # new rank 0 takes up old rank 0's stream where it stopped
    got, _ = PreparedLoader(prepared, 128, 2, new[0]).next_batch()
    assert torch.equal(got.input_ids, want.input_ids) and torch.equal(got.position_ids, want.position_ids)
    assert reshard_prepared(states, 2) == states  # same world size: the saved states as they are


def test_zeros_data_is_all_zero() -> None:
    b, _ = next(iter(ZerosLoader(16, 2, 0)))
    assert b.input_ids.shape == (2, 16) and not b.input_ids.any() and not b.labels.any()


@pytest.mark.slow
def test_train_reads_prepared_shards_and_zeros_and_resumes_on_fewer_ranks(prepared: Path, tmp_path: Path) -> None:
    from tests.training.conftest import step_records, torchrun, train_here

    common = ["--config", "tiny", "--seq-len", "128", "--micro-batch", "2", "--warmup-steps", "1",
              "--checkpoint-every", "2", "--loss-chunk-tokens", "96"]
    torchrun([*common, "--steps", "2", "--run-dir", str(tmp_path / "p"), "--data", str(prepared)])
    # the single-rank runs in this process (one rank needs no torchrun): zeros, then the resume
    assert train_here([*common, "--steps", "2", "--run-dir", str(tmp_path / "z"), "--data", "zeros"])[0] == 0
    p, z = step_records(tmp_path / "p"), step_records(tmp_path / "z")
    assert sorted(p) == sorted(z) == [1, 2]
    # the 2-rank run resumes on 1 rank: model and prepared-data position resharded
    code, err = train_here([*common, "--steps", "3", "--run-dir", str(tmp_path / "p"), "--data", str(prepared)])
    assert code == 0 and "saved by 2 ranks, now 1" in err and sorted(step_records(tmp_path / "p")) == [1, 2, 3]
    assert 5.0 < p[1]["loss"] < 7.0  # about ln(512) at initialisation on real tokens
    assert p[1]["loss"] != z[1]["loss"]
