from __future__ import annotations

import json
from pathlib import Path

import torch

from training.data import LoaderState, PackedLoader, Segment
from training.model import IGNORE_INDEX, document_mask
from training.tokenizer import EOS, PAD, load_tokenizer


def _corpus(tmp_path: Path, texts: list[str]) -> Path:
    p = tmp_path / "docs.jsonl"
    p.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return p


def _loader(path: Path, tok_path: Path, seq: int, split: bool) -> PackedLoader:
    tok = load_tokenizer(tok_path)
    st = LoaderState(seed=0, epoch=0, rank=0, world=1, segments=[Segment(str(path), 0, path.stat().st_size)])
    return PackedLoader([path], tok, seq, 1, st, split_documents=split)


def test_documents_never_predict_across_a_boundary(tmp_path: Path, tokenizer_path: Path) -> None:
    tok = load_tokenizer(tokenizer_path)
    texts = ["alice sees the cat.", "bob likes a dog. carol meets the river.", "dave helps a book."]
    ids = [tok.encode(t).ids for t in texts]
    seq = sum(len(i) for i in ids)
    batch, _ = _loader(_corpus(tmp_path, texts), tokenizer_path, seq, split=True).next_batch()
    eos = tok.token_to_id(EOS)
    expect_in: list[int] = []
    expect_lab: list[int] = []
    expect_pos: list[int] = []
    for doc in ids:
        expect_in += doc
        expect_lab += [*doc[1:], eos]  # each document's last position predicts EOS, never the next doc
        expect_pos += list(range(len(doc)))
    assert batch.input_ids[0].tolist() == expect_in
    assert batch.labels[0].tolist() == expect_lab
    assert batch.position_ids[0].tolist() == expect_pos
    assert batch.doc_ids[0].tolist() == [d for d, doc in enumerate(ids) for _ in doc]


def test_padding_has_label_minus_100_not_the_pad_id(tmp_path: Path, tokenizer_path: Path) -> None:
    tok = load_tokenizer(tokenizer_path)
    texts = ["alice sees the cat. bob likes a dog.", "carol meets the river. dave helps a book. erin calls the train."]
    n0 = len(tok.encode(texts[0]).ids)
    seq = n0 + 3  # the second document does not fit in the three slots left
    loader = _loader(_corpus(tmp_path, texts), tokenizer_path, seq, split=False)
    first, _ = loader.next_batch()
    labels = first.labels[0].tolist()
    assert labels[n0:] == [IGNORE_INDEX] * 3
    assert tok.token_to_id(PAD) not in labels
    assert first.doc_ids[0].tolist()[n0:] == [-1] * 3
    second, _ = loader.next_batch()
    assert second.input_ids[0].tolist()[:5] == tok.encode(texts[1]).ids[:5]  # starts the next row whole


def test_split_document_continues_in_the_next_row_at_the_saved_token(tmp_path: Path, tokenizer_path: Path) -> None:
    tok = load_tokenizer(tokenizer_path)
    long = " ".join(["alice sees the cat."] * 10)
    ids = tok.encode(long).ids
    path = _corpus(tmp_path, [long])
    loader = _loader(path, tokenizer_path, 8, split=True)
    rows = []
    for _ in range(3):
        b, state = loader.next_batch()
        rows.append(b)
    assert state.segments[0].skip_tokens == 24 and state.segments[0].offset == 0
    assert torch.cat([r.input_ids[0] for r in rows]).tolist() == ids[:24]


def test_document_mask_is_block_causal() -> None:
    doc = torch.tensor([[0, 0, 1, 1, 1, -1]])
    m = document_mask(doc)[0, 0]
    assert m[1].tolist() == [True, True, False, False, False, False]
    assert m[4].tolist() == [False, False, True, True, True, False]
    assert m[5].tolist() == [False, False, False, False, False, True]  # padding attends to itself only


def test_document_mask_changes_attention_but_positions_alone_do_not_leak_future(tokenizer_path: Path) -> None:
    from training.configs import tiny
    from training.model import Llama

    torch.manual_seed(0)
    model = Llama(tiny()).eval()
    ids = torch.randint(0, 300, (1, 12))
    pos = torch.tensor([list(range(6)) + list(range(6))])
    two_docs = torch.tensor([[0] * 6 + [1] * 6])
    masked = model.hidden_states(ids, pos, two_docs)
    # the second document, masked, sees nothing of the first: same as running it alone
    alone = model.hidden_states(ids[:, 6:], pos[:, 6:])
    assert torch.allclose(masked[:, 6:], alone, atol=1e-5)
    assert torch.allclose(masked[:, :6], model.hidden_states(ids[:, :6], pos[:, :6]), atol=1e-5)


def test_plain_text_shards_are_one_document_per_line(tmp_path: Path, tokenizer_path: Path) -> None:
    tok = load_tokenizer(tokenizer_path)
    path = tmp_path / "docs.txt"
    path.write_text("alice sees the cat.\n\nbob likes a dog.\n")
    ids = [tok.encode(t).ids for t in ("alice sees the cat.", "bob likes a dog.")]
    batch, state = _loader(path, tokenizer_path, sum(map(len, ids)), split=True).next_batch()
    assert batch.input_ids[0].tolist() == ids[0] + ids[1]
    assert state.segments[0].offset == path.stat().st_size  # the empty line was skipped, all read
