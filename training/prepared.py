"""Data prepared once: `python -m training prepare-data --tokenizer T --input SHARDS... --out DIR`.

Every input shard (JSONL with a `text` field, or text with one document per line) becomes one
token shard: `shard_NNNNN.bin` (uint32 token ids, memory-mapped at training time) and
`shard_NNNNN.idx` (int64 document start offsets, one more than there are documents). Documents get
BOS/EOS as the tokenizer's `tokenizer_config.json` says (BOS only when `add_bos_token` is true; EOS
always, it is the label that ends a document), and a document longer than `--max-doc-tokens` is
split into pieces of at most that length. Shards are tokenized in parallel, one process per core;
each shard's bytes depend only on its input and the tokenizer, so the output is the same for any
number of workers. `manifest.json` lists every shard with its source, token and document counts and
SHA-256 of both files, and the tokenizer's SHA-256.

`PreparedLoader` packs those documents exactly as `PackedLoader` packs raw shards (same state,
same resume): a segment is a range of document numbers of one token shard instead of a byte range.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from training.data import Batch, LoaderState, PackedLoader, Segment, same_world
from training.tokenizer import EOS, PAD, line_text

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Specials:
    bos: int | None
    eos: int
    pad: int


def specials(tokenizer_path: Path, tok: Tokenizer) -> Specials:
    """BOS/EOS as `tokenizer_config.json` beside the tokenizer says; without one, this job's own
    tokenizer's EOS and no BOS."""
    cfg_path = tokenizer_path.parent / "tokenizer_config.json"
    cfg: dict[str, Any] = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}

    def token(key: str) -> str | None:
        v = cfg.get(key)
        return v.get("content") if isinstance(v, dict) else v

    eos_name = token("eos_token") or EOS
    eos = tok.token_to_id(eos_name)
    if eos is None:
        raise ValueError(f"{tokenizer_path}: no EOS token {eos_name!r}")
    bos_name = token("bos_token")
    bos = tok.token_to_id(bos_name) if bos_name and cfg.get("add_bos_token", True) else None
    pad = tok.token_to_id(token("pad_token") or PAD)
    return Specials(bos, eos, pad if pad is not None else eos)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _tokenize_shard(job: tuple[int, str, str, str, int]) -> dict[str, Any]:
    """One input shard -> shard_NNNNN.{bin,idx}; returns its manifest entry."""
    index, source, tokenizer_path, out_dir, max_doc = job
    tok = Tokenizer.from_file(tokenizer_path)
    sp = specials(Path(tokenizer_path), tok)
    src, out = Path(source), Path(out_dir)
    pieces: list[np.ndarray] = []
    starts = [0]
    with open(src, "rb") as f:
        for raw in f:
            text = line_text(raw, src)
            if not text:
                continue
            ids = ([sp.bos] if sp.bos is not None else []) + tok.encode(text, add_special_tokens=False).ids + [sp.eos]
            for a in range(0, len(ids), max_doc):
                piece = np.asarray(ids[a:a + max_doc], dtype=np.uint32)
                pieces.append(piece)
                starts.append(starts[-1] + len(piece))
    name = f"shard_{index:05d}"
    tokens = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint32)
    tokens.astype("<u4").tofile(out / f"{name}.bin")
    np.asarray(starts, dtype="<i8").tofile(out / f"{name}.idx")
    return {"name": name, "source": src.name, "tokens": int(starts[-1]), "documents": len(starts) - 1,
            "sha256_bin": file_sha256(out / f"{name}.bin"), "sha256_idx": file_sha256(out / f"{name}.idx")}


def prepare(tokenizer: Path, inputs: Sequence[Path], out: Path, workers: int | None = None,
            max_doc_tokens: int = 65536, progress: bool = False) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer.from_file(str(tokenizer))
    sp = specials(tokenizer, tok)
    jobs = [(i, str(p), str(tokenizer), str(out), max_doc_tokens) for i, p in enumerate(inputs)]
    with ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        results = pool.map(_tokenize_shard, jobs)
        if progress:
            from tqdm import tqdm  # type: ignore[import-untyped]

            results = tqdm(results, total=len(jobs), desc="tokenizing shards", unit="shard")
        shards = list(results)
    manifest = {"tokenizer_sha256": file_sha256(tokenizer), "bos": sp.bos, "eos": sp.eos, "pad": sp.pad,
                "max_doc_tokens": max_doc_tokens, "total_tokens": sum(s["tokens"] for s in shards),
                "total_documents": sum(s["documents"] for s in shards), "shards": shards}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def read_manifest(data_dir: Path, verify: bool = False) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((data_dir / MANIFEST).read_text())
    if verify:
        for s in manifest["shards"]:
            for ext in ("bin", "idx"):
                if file_sha256(data_dir / f"{s['name']}.{ext}") != s[f"sha256_{ext}"]:
                    raise ValueError(f"{data_dir / s['name']}.{ext}: checksum differs from the manifest")
    return manifest


def prepared_segments(data_dir: Path, rank: int, world: int, seed: int, epoch: int) -> list[Segment]:
    """Rank r's share of every shard: documents [n·r/w, n·(r+1)/w), shards in a seeded order."""
    shards = [s for s in read_manifest(data_dir)["shards"] if s["documents"]]
    random.Random(seed * 1_000_003 + epoch).shuffle(shards)
    segs = []
    for s in shards:
        lo, hi = s["documents"] * rank // world, s["documents"] * (rank + 1) // world
        if hi > lo:
            segs.append(Segment(str(data_dir / f"{s['name']}.bin"), lo, hi))
    return segs


def reshard_prepared(states: Sequence[LoaderState], new_world: int) -> list[LoaderState]:
    """Deal the documents the old ranks had left in this epoch out to `new_world` ranks, in equal
    counts (offsets count documents, so any cut is a document boundary). A document a rank was in
    the middle of keeps its `skip_tokens`: no document is read twice or lost. A rank that had rolled
    into the next epoch already gives nothing back; every new rank starts that epoch afresh."""
    same = same_world(states, new_world)
    if same is not None:
        return same
    seed, epoch = states[0].seed, min(s.epoch for s in states)
    pool = [g for s in sorted(states, key=lambda s: s.rank) if s.epoch == epoch for g in s.segments if g.end > g.offset]
    total = sum(g.end - g.offset for g in pool)
    out = [LoaderState(seed, epoch, r, new_world) for r in range(new_world)]
    consumed = 0
    for g in pool:  # (nothing left: every new rank's loader rolls into the next epoch by itself)
        start, skip = g.offset, g.skip_tokens
        while start < g.end:
            r = min(consumed * new_world // total, new_world - 1)
            cut = min(g.end, start + max(1, (r + 1) * total // new_world - consumed))
            out[r].segments.append(Segment(g.path, start, cut, skip))
            consumed += cut - start
            start, skip = cut, 0
    return out


class PreparedLoader(PackedLoader):
    """`PackedLoader` over prepared token shards: segment offsets count documents, not bytes."""

    def __init__(self, data_dir: Path, seq_len: int, micro_batch: int, state: LoaderState,
                 split_documents: bool = True) -> None:
        manifest = read_manifest(data_dir)
        self.data_dir, self.files = data_dir, []
        self.seq_len, self.micro_batch, self.split_documents = seq_len, micro_batch, split_documents
        self.state, self.eos, self.pad = state, int(manifest["eos"]), int(manifest["pad"])
        self._doc: list[int] | None = None
        self._next_offset = 0
        self._maps: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def fresh_prepared(cls, data_dir: Path, seq_len: int, micro_batch: int, rank: int, world: int, seed: int,
                       split_documents: bool = True) -> PreparedLoader:
        st = LoaderState(seed, 0, rank, world, prepared_segments(data_dir, rank, world, seed, 0))
        return cls(data_dir, seq_len, micro_batch, st, split_documents)

    def _arrays(self, path: str) -> tuple[np.ndarray, np.ndarray]:
        if path not in self._maps:
            tokens = np.memmap(path, dtype="<u4", mode="r")
            starts = np.fromfile(path[:-len(".bin")] + ".idx", dtype="<i8")
            self._maps[path] = (tokens, starts)
        return self._maps[path]

    def _read_doc(self, seg: Segment) -> tuple[list[int], int]:
        """Document `seg.offset` of a prepared shard, without its final EOS (the packer adds EOS as the
        last label); offsets count documents."""
        tokens, starts = self._arrays(seg.path)
        ids = tokens[starts[seg.offset]:starts[seg.offset + 1]].tolist()
        if ids and ids[-1] == self.eos:
            ids = ids[:-1]
        return ids, seg.offset + 1

    def _epoch_segments(self, epoch: int) -> list[Segment]:
        st = self.state
        return prepared_segments(self.data_dir, st.rank, st.world, st.seed, epoch)

    def _source(self) -> str:
        return str(self.data_dir)

def prepared_data_dir(data: Sequence[Path]) -> Path | None:
    """The folder when --data names one folder written by prepare-data."""
    return data[0] if len(data) == 1 and (data[0] / MANIFEST).exists() else None


def zeros_data(data: Sequence[Path]) -> bool:
    return len(data) == 1 and str(data[0]) == "zeros"


class ZerosLoader:
    """`--data zeros`: every token 0, every label 0, one document per row. Rules the data in or
    out of a problem (a loss or speed change that remains with zeros is not the data's)."""

    def __init__(self, seq_len: int, micro_batch: int, rank: int) -> None:
        self.seq_len, self.micro_batch, self.rank, self.rows = seq_len, micro_batch, rank, 0

    def __iter__(self) -> Iterator[tuple[Batch, LoaderState]]:
        b, s = self.micro_batch, self.seq_len
        while True:
            self.rows += b
            zeros = torch.zeros(b, s, dtype=torch.int64)
            yield (Batch(zeros, zeros.clone(), torch.arange(s).expand(b, s).contiguous(), zeros.clone()),
                   LoaderState(0, 0, self.rank, 1, [], self.rows))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training prepare-data")
    p.add_argument("--tokenizer", type=Path, required=True, help="tokenizer.json (tokenizer_config.json beside it "
                   "says BOS/EOS)")
    p.add_argument("--input", type=Path, nargs="+", required=True, help="JSONL/text shards or folders of them")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--workers", type=int, default=0, help="processes (0: every core)")
    p.add_argument("--max-doc-tokens", type=int, default=65536, help="longer documents are split into pieces")
    a = p.parse_args(argv)
    from training.data import discover_files

    m = prepare(a.tokenizer, discover_files(a.input), a.out, a.workers or None, a.max_doc_tokens, progress=True)
    print(f"wrote {a.out}: {len(m['shards'])} shards, {m['total_documents']:,} documents, "
          f"{m['total_tokens']:,} tokens")
    return 0
