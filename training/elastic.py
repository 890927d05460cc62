"""A restart on another number of ranks: which data each new rank reads, and from where.

`--resize-batch keep` (a restart that shrinks by a whole factor k, e.g. 4 ranks -> 2): every new rank
runs the data streams of k old ranks as k x grad_accum micro-batches, so each step sees exactly the
micro-batches the uninterrupted run would have (same global batch, same next batch, same loss up to
the order of floating-point sums). A checkpoint saved so keeps every stream's position
(`StreamsState`), and a later restart on the original number of ranks gives each rank its own stream
back. `reshard` (the default, and what a size that does not divide the old one gets): the unread data
is dealt out again to the new ranks (`training.data.reshard_states`), so the global batch changes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from training.configs import ModelConfig, TrainConfig
from training.data import Batch, LoaderState, PackedLoader, SyntheticLoader
from training.job_config import DataConfig
from training.prepared import PreparedLoader, ZerosLoader, zeros_data
from training.tokenizer import load_tokenizer

Source = Iterator[tuple[Batch, LoaderState]]


@dataclass
class StreamsState(LoaderState):
    """The loader state of a rank that runs several old ranks' streams (in old-rank order)."""

    streams: list[LoaderState] = field(default_factory=list)


def streams_of(state: LoaderState) -> list[LoaderState]:
    return list(state.streams) if isinstance(state, StreamsState) else [state]


def streams_from_json(raw: dict[str, object]) -> LoaderState:
    base = LoaderState.from_json(raw)
    streams = raw.get("streams")
    if not isinstance(streams, list) or not streams:
        return base
    return StreamsState(base.seed, base.epoch, base.rank, base.world, [], base.rows,
                        [LoaderState.from_json(s) for s in streams])


@dataclass(frozen=True)
class DataResume:
    """What a resumed rank reads: its own saved state (`state`), the streams of several old ranks
    (`streams`), or nothing decided yet (`reshard`: the old ranks' states to deal out again)."""

    state: LoaderState | None = None
    streams: list[LoaderState] = field(default_factory=list)
    reshard: list[LoaderState] = field(default_factory=list)


def plan_data(saved: Sequence[LoaderState], world: int, rank: int, keep_batch: bool) -> DataResume:
    """`saved`: every saved rank's loader state. The data streams they ran (one per rank of the run
    that started them) go one per rank when the counts match, k per rank with `keep_batch` when the
    new world divides them, else they are dealt out again."""
    logical = sorted((s for st in saved for s in streams_of(st)), key=lambda s: s.rank)
    if len(logical) == world:
        return DataResume(state=logical[rank])
    if keep_batch and len(logical) > world and len(logical) % world == 0:
        k = len(logical) // world
        return DataResume(streams=logical[rank * k:(rank + 1) * k])
    return DataResume(reshard=logical)


def open_source(data: DataConfig, mcfg: ModelConfig, tcfg: TrainConfig, state: LoaderState | None,
                rank: int, world: int, start_step: int, files: Sequence[Path], prepared: Path | None) -> Source:
    """The batches of one data stream: rank `rank` of `world` from `state` (None: from the start)."""
    if data.synthetic:
        return iter(SyntheticLoader(mcfg.vocab_size, tcfg.seq_len, tcfg.micro_batch, tcfg.seed + start_step, rank))
    if zeros_data(data.paths):
        return iter(ZerosLoader(tcfg.seq_len, tcfg.micro_batch, rank))
    split = data.split_documents
    if prepared is not None:
        return iter(PreparedLoader.fresh_prepared(prepared, tcfg.seq_len, tcfg.micro_batch, rank, world, tcfg.seed,
                                                  split) if state is None else
                    PreparedLoader(prepared, tcfg.seq_len, tcfg.micro_batch, state, split))
    if not files or data.tokenizer is None:
        raise ValueError("--data and --tokenizer are required unless --synthetic")
    tok = load_tokenizer(data.tokenizer)
    if tok.get_vocab_size() > mcfg.vocab_size:
        raise ValueError(f"tokenizer vocabulary {tok.get_vocab_size()} > model's {mcfg.vocab_size}")
    if state is None:
        return iter(PackedLoader.fresh(files, tok, tcfg.seq_len, tcfg.micro_batch, rank, world, tcfg.seed,
                                       split_documents=split))
    return iter(PackedLoader(files, tok, tcfg.seq_len, tcfg.micro_batch, state, split_documents=split))


def interleave(sources: Sequence[Source], per_stream: int, rank: int, world: int) -> Source:
    """`per_stream` micro-batches from each source in turn (one step of k old ranks), each paired with
    the state of every stream after it."""
    latest: list[LoaderState | None] = [None] * len(sources)
    while True:
        for i, src in enumerate(sources):
            for _ in range(per_stream):
                batch, st = next(src)
                latest[i] = st
                done = [s for s in latest if s is not None]
                head = done[0]
                yield batch, StreamsState(head.seed, head.epoch, rank, world, [], 0, done)
