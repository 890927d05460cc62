"""Tokenizer: a byte-level BPE trained locally with Hugging Face `tokenizers`, or a shipped
tokenizer.json. Nothing is downloaded at run time."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

EOS = "<|end_of_text|>"
PAD = "<|pad|>"


def iter_texts(paths: Iterable[Path], field: str = "text") -> Iterator[str]:
    for path in paths:
        with open(path, "rb") as f:
            for raw in f:
                text = line_text(raw, path, field)
                if text:
                    yield text


def line_text(raw: bytes, path: Path, field: str = "text") -> str:
    """One line of a shard -> its text. `.jsonl` lines are objects holding `field`; other files are
    plain text, one document per line."""
    line = raw.decode("utf-8").rstrip("\n")
    if not line.strip():
        return ""
    if path.suffix == ".jsonl":
        value = json.loads(line).get(field, "")
        return value if isinstance(value, str) else ""
    return line


def train_tokenizer(paths: Iterable[Path], vocab_size: int, out: Path, field: str = "text") -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS, PAD],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(iter_texts(paths, field), trainer=trainer)
    out.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(out))
    return tok


def load_tokenizer(path: Path) -> Tokenizer:
    tok = Tokenizer.from_file(str(path))
    if tok.token_to_id(EOS) is None:
        raise ValueError(f"{path}: tokenizer has no {EOS} token")
    return tok
