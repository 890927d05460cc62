"""Data: JSONL/text shards -> tokens -> packed rows, with a loader whose state is a few integers.

Sharding: every file is cut into `world` byte ranges at line starts; rank r reads range r of
every file (in an order shuffled by seed and epoch), so ranks never read the same document and
no index of the corpus is needed. The loader's state is the list of byte ranges still to read
(per-file byte offset of the next unread line, and how many tokens of that line were already
used when a document was split across rows), the epoch and the seed. Saved with each checkpoint,
it lets a resume `seek` straight to the next sample.

Packing: each document of n tokens t0..t(n-1) yields n training positions (input t_i, label
t_(i+1), the last label being EOS), so no position ever predicts across a document boundary.
Position ids restart at 0 for every document piece in a row, and `doc_ids` lets the model build a
block-causal mask. Padding (only when `split_documents` is off, or never in the default mode)
has label -100.
"""

from __future__ import annotations

import json
import queue
import random
import threading
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tokenizers import Tokenizer

from training.model import IGNORE_INDEX
from training.tokenizer import EOS, PAD, line_text


@dataclass
class Segment:
    path: str
    offset: int  # byte offset of the next unread line
    end: int  # first byte not in this segment (a line start or the file size)
    skip_tokens: int = 0  # training positions of the line at `offset` already emitted


@dataclass
class LoaderState:
    seed: int
    epoch: int
    rank: int
    world: int
    segments: list[Segment] = field(default_factory=list)
    rows: int = 0

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, object]) -> LoaderState:
        segs = [Segment(**s) for s in raw["segments"]]  # type: ignore[attr-defined]
        return cls(seed=int(raw["seed"]), epoch=int(raw["epoch"]), rank=int(raw["rank"]),  # type: ignore[call-overload]
                   world=int(raw["world"]), segments=segs, rows=int(raw["rows"]))  # type: ignore[call-overload]


@dataclass(frozen=True)
class Batch:
    input_ids: torch.Tensor  # [B, S] int64
    labels: torch.Tensor  # [B, S] int64, -100 where no loss
    position_ids: torch.Tensor  # [B, S] int64, restarting per document piece
    doc_ids: torch.Tensor  # [B, S] int64, -1 on padding

    def to(self, device: torch.device) -> Batch:
        return Batch(*(t.to(device, non_blocking=True) for t in
                       (self.input_ids, self.labels, self.position_ids, self.doc_ids)))


def line_start_at(path: Path, pos: int, size: int) -> int:
    """First line start at or after byte `pos`."""
    if pos <= 0:
        return 0
    if pos >= size:
        return size
    with open(path, "rb") as f:
        f.seek(pos - 1)
        f.readline()
        return min(f.tell(), size)


def discover_files(paths: Sequence[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*") if q.suffix in (".jsonl", ".txt") and q.is_file()))
        elif p.is_file():
            out.append(p)
        else:
            raise FileNotFoundError(p)
    if not out:
        raise FileNotFoundError(f"no .jsonl/.txt shards under {[str(p) for p in paths]}")
    return sorted(out)


def rank_segments(files: Sequence[Path], rank: int, world: int, seed: int, epoch: int) -> list[Segment]:
    order = list(files)
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    segs: list[Segment] = []
    for path in order:
        size = path.stat().st_size
        lo = line_start_at(path, size * rank // world, size)
        hi = line_start_at(path, size * (rank + 1) // world, size)
        if hi > lo:
            segs.append(Segment(str(path), lo, hi))
    return segs


def same_world(states: Sequence[LoaderState], new_world: int) -> list[LoaderState] | None:
    """Copies of the states in rank order when the world size is unchanged, else None (reshard)."""
    if not states:
        raise ValueError("no loader states to reshard")
    if len(states) != new_world:
        return None
    return [LoaderState(s.seed, s.epoch, s.rank, s.world, [Segment(**asdict(g)) for g in s.segments], s.rows)
            for s in sorted(states, key=lambda s: s.rank)]


def reshard_states(states: Sequence[LoaderState], files: Sequence[Path], new_world: int) -> list[LoaderState]:
    """Redistribute what old ranks had left to read over `new_world` ranks (a restart after hosts
    were dropped). Remaining bytes are dealt in equal parts cut at line starts; documents already
    read are never read again in this epoch."""
    same = same_world(states, new_world)
    if same is not None:
        return same
    seed, epoch = states[0].seed, min(s.epoch for s in states)
    pool = sorted((g for s in states if s.epoch == epoch for g in s.segments), key=lambda g: (g.path, g.offset))
    total = sum(g.end - g.offset for g in pool)
    out = [LoaderState(seed, epoch, r, new_world) for r in range(new_world)]
    if total == 0:
        for r, st in enumerate(out):
            st.epoch, st.segments = epoch + 1, rank_segments(files, r, new_world, seed, epoch + 1)
        return out
    per = total / new_world
    consumed = 0
    for g in pool:
        start, skip = g.offset, g.skip_tokens
        size = Path(g.path).stat().st_size
        while start < g.end:
            r = min(int(consumed / per), new_world - 1)
            if r == new_world - 1:
                cut = g.end
            else:
                quota_end = start + int((r + 1) * per) - consumed
                cut = min(g.end, line_start_at(Path(g.path), max(quota_end, start + 1), size))
            out[r].segments.append(Segment(g.path, start, cut, skip))
            consumed += cut - start
            start, skip = cut, 0
    return out


class PackedLoader:
    """Yields (Batch, state after this batch). Deterministic for a given state."""

    def __init__(self, files: Sequence[Path], tokenizer: Tokenizer, seq_len: int, micro_batch: int,
                 state: LoaderState, split_documents: bool = True, field_name: str = "text") -> None:
        self.files = list(files)
        self.tok = tokenizer
        self.seq_len, self.micro_batch = seq_len, micro_batch
        self.split_documents = split_documents
        self.field = field_name
        self.state = state
        eos = tokenizer.token_to_id(EOS)
        pad = tokenizer.token_to_id(PAD)
        assert eos is not None
        self.eos = eos
        # Input id written under padding; any id works since its label is -100 and it is masked.
        self.pad = pad if pad is not None else eos
        self._doc: list[int] | None = None  # token ids of the line at segments[0].offset
        self._next_offset = 0

    @classmethod
    def fresh(cls, files: Sequence[Path], tokenizer: Tokenizer, seq_len: int, micro_batch: int, rank: int,
              world: int, seed: int, **kw: object) -> PackedLoader:
        st = LoaderState(seed, 0, rank, world, rank_segments(files, rank, world, seed, 0))
        return cls(files, tokenizer, seq_len, micro_batch, st, **kw)  # type: ignore[arg-type]

    def _load_doc(self) -> list[int]:
        """Token ids of the current document, reading forward past empty ones; rolls the epoch over."""
        if self._doc is not None:
            return self._doc
        st = self.state
        for _ in range(2):
            while st.segments:
                seg = st.segments[0]
                if seg.offset >= seg.end:
                    st.segments.pop(0)
                    continue
                ids, nxt = self._read_doc(seg)
                if not ids:
                    seg.offset, seg.skip_tokens = nxt, 0
                    continue
                self._doc, self._next_offset = ids, nxt
                return ids
            st.epoch += 1
            st.segments = self._epoch_segments(st.epoch)
        raise ValueError(f"rank {st.rank}: no documents in its share of {self._source()}")

    def _read_doc(self, seg: Segment) -> tuple[list[int], int]:
        """The document at `seg.offset` (a line of a raw shard, tokenized) and the offset after it."""
        path = Path(seg.path)
        with open(path, "rb") as f:
            f.seek(seg.offset)
            raw = f.readline()
            nxt = f.tell()
        return list(self.tok.encode(line_text(raw, path, self.field), add_special_tokens=False).ids), nxt

    def _epoch_segments(self, epoch: int) -> list[Segment]:
        st = self.state
        return rank_segments(self.files, st.rank, st.world, st.seed, epoch)

    def _source(self) -> str:
        return f"{len(self.files)} file(s)"

    def _row(self) -> tuple[list[int], list[int], list[int], list[int]]:
        s = self.seq_len
        inp: list[int] = []
        lab: list[int] = []
        pos: list[int] = []
        doc: list[int] = []
        piece = 0
        while len(inp) < s:
            ids = self._load_doc()
            seg = self.state.segments[0]
            left = len(ids) - seg.skip_tokens
            room = s - len(inp)
            if left > room and not self.split_documents and inp:
                break  # the document starts the next row; the rest of this one is padding
            take = min(left, room)
            a = seg.skip_tokens
            targets = [*ids[1:], self.eos]
            inp.extend(ids[a:a + take])
            lab.extend(targets[a:a + take])
            pos.extend(range(take))
            doc.extend([piece] * take)
            piece += 1
            if take == left:
                seg.offset, seg.skip_tokens = self._next_offset, 0
                self._doc = None
            else:
                seg.skip_tokens += take
        n = s - len(inp)
        if n:
            inp.extend([self.pad] * n)
            lab.extend([IGNORE_INDEX] * n)
            pos.extend([0] * n)
            doc.extend([-1] * n)
        return inp, lab, pos, doc

    def next_batch(self) -> tuple[Batch, LoaderState]:
        rows = [self._row() for _ in range(self.micro_batch)]
        self.state.rows += self.micro_batch
        cols = [torch.tensor([r[i] for r in rows], dtype=torch.int64) for i in range(4)]
        snap = LoaderState.from_json(json.loads(json.dumps(self.state.to_json())))
        return Batch(*cols), snap

    def __iter__(self) -> Iterator[tuple[Batch, LoaderState]]:
        while True:
            yield self.next_batch()


class Prefetcher:
    """Runs a loader in a background thread, `depth` batches ahead. Each batch travels with the
    loader state just after it, so a checkpoint records what was consumed, not what was prefetched."""

    def __init__(self, it: Iterator[tuple[Batch, LoaderState]], depth: int = 2) -> None:
        self._q: queue.Queue[tuple[Batch, LoaderState] | BaseException] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._it = it
        self._t = threading.Thread(target=self._run, name="data-prefetch", daemon=True)
        self._t.start()

    def _run(self) -> None:
        try:
            for item in self._it:
                while not self._stop.is_set():
                    try:
                        self._q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if self._stop.is_set():
                    return
        except BaseException as e:  # handed to the consumer, which re-raises it
            self._q.put(e)

    def __next__(self) -> tuple[Batch, LoaderState]:
        item = self._q.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self._stop.set()
        self._t.join(timeout=5)


class SyntheticLoader:
    """Uniform random tokens, for throughput runs (the published baselines use the same)."""

    def __init__(self, vocab: int, seq_len: int, micro_batch: int, seed: int, rank: int) -> None:
        self.vocab, self.seq_len, self.micro_batch = vocab, seq_len, micro_batch
        self.gen = torch.Generator().manual_seed(seed * 7919 + rank)
        self.state = LoaderState(seed, 0, rank, 1)

    def next_batch(self) -> tuple[Batch, LoaderState]:
        b, s = self.micro_batch, self.seq_len
        ids = torch.randint(0, self.vocab, (b, s + 1), generator=self.gen)
        pos = torch.arange(s).expand(b, s).contiguous()
        self.state.rows += b
        return Batch(ids[:, :-1].contiguous(), ids[:, 1:].contiguous(), pos, torch.zeros(b, s, dtype=torch.int64)), \
            LoaderState(self.state.seed, 0, self.state.rank, 1, [], self.state.rows)

    def __iter__(self) -> Iterator[tuple[Batch, LoaderState]]:
        while True:
            yield self.next_batch()
