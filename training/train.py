"""The training worker: one process per GPU (or per CPU rank under gloo), started by torchrun."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import time
from dataclasses import asdict, fields, replace
from pathlib import Path

import torch
import torch.distributed as dist

from training.checkpoint import (
    ExtraState,
    capture_rng,
    latest_complete,
    mark_complete,
    read_extras,
    restore_rng,
    step_dir,
    write_extra,
)
from training.configs import ModelConfig, TrainConfig, model_config, recommended_train
from training.data import LoaderState, Prefetcher, discover_files, reshard_states
from training.diagnosis.watch import JobWatch
from training.elastic import DataResume, interleave, open_source, plan_data
from training.engines import Engine, lr_at
from training.fit import add_fit_args, plan_before_start
from training.joblog import JobMetricsWriter
from training.monitor import (
    GcController,
    GoodputMeter,
    MetricsWriter,
    SlowStepDetector,
    StepRecord,
    log,
    mfu,
    peak_tflops,
)
from training.prepared import prepared_data_dir, reshard_prepared, zeros_data
from training.profile import profiled_step
from training.safe_load import CheckpointRefused


def add_train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="model name (llama3_70b, llama3_8b, llama3_1b, tiny, NAME-sliceK); with "
                   "--init-from, the run settings' name only (the shape comes from config.json)")
    p.add_argument("--init-from", type=Path, help="Hugging Face Llama folder (config.json, safetensors): start from "
                   "its weights; its tokenizer.json is the default --tokenizer")
    p.add_argument("--engine", choices=("fsdp", "deepspeed"), default="fsdp")
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--data", type=Path, nargs="*", default=[],
                   help="JSONL/text shards or folders; a folder written by prepare-data; or `zeros` (all-zero tokens)")
    p.add_argument("--tokenizer", type=Path, help="tokenizer.json (required with --data)")
    p.add_argument("--synthetic", action="store_true", help="random tokens (throughput runs)")
    p.add_argument("--split-documents", type=int, choices=(0, 1), default=1)
    p.add_argument("--resume", choices=("auto", "never"), default="auto")
    p.add_argument("--prom-dir", type=Path, help="node exporter textfile directory")
    p.add_argument("--job-name", default="bringup-train")
    p.add_argument("--sdpa", choices=("auto", "cudnn", "flash"), default="auto",
                   help="attention kernel to prefer on GPU (auto: PyTorch's own order)")
    p.add_argument("--profile-step", type=int, default=0,
                   help="profile this step; rank 0 writes RUN/profile/step_N.{json,txt} (0: never)")
    p.add_argument("--max-steps-this-run", type=int, default=0, help="stop after this many steps (0: no limit)")
    p.add_argument("--resize-batch", choices=("reshard", "keep"), default="reshard",
                   help="resumed on fewer ranks: keep the global batch (each rank runs k old ranks' data, "
                   "k x grad-accum) or deal the unread data out again (training/elastic.py)")
    add_fit_args(p)
    for f in fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        default = f.default
        if isinstance(default, bool):
            p.add_argument(flag, type=int, choices=(0, 1), default=None)
        elif isinstance(default, int | float | str):
            p.add_argument(flag, type=type(default), default=None)


def train_config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The model's recommended run settings, with every flag given on the command line applied."""
    kw: dict[str, object] = {}
    for f in fields(TrainConfig):
        v = getattr(args, f.name, None)
        if v is not None:
            kw[f.name] = bool(v) if isinstance(f.default, bool) else v
    return replace(recommended_train(args.config or ""), **kw)  # type: ignore[arg-type]


def model_from_args(args: argparse.Namespace) -> ModelConfig:
    if args.init_from is not None:
        from training.hf import model_config_from_hf

        if args.tokenizer is None and (args.init_from / "tokenizer.json").exists():
            args.tokenizer = args.init_from / "tokenizer.json"
        return model_config_from_hf(args.init_from)
    if not args.config:
        raise ValueError("--config or --init-from is required")
    return model_config(args.config)


def build_engine(name: str, mcfg: ModelConfig, tcfg: TrainConfig, device: torch.device,
                 param_dtype: torch.dtype = torch.bfloat16, init_from: Path | None = None) -> Engine:
    """The engine with its weights: from a Hugging Face folder (`init_from`) or freshly initialised."""
    if name == "fsdp":
        from training.engines.fsdp import FsdpEngine

        return FsdpEngine(mcfg, tcfg, device, param_dtype=param_dtype, init_from=init_from)
    from training.engines.zero3 import DeepSpeedEngine

    return DeepSpeedEngine(mcfg, tcfg, device, param_dtype=param_dtype, init_from=init_from)


def local_param_count(model: torch.nn.Module) -> int:
    """Parameter elements this rank holds: its FSDP2 shard or its ZeRO-3 partition."""
    n = 0
    for p in model.parameters():
        if hasattr(p, "ds_tensor"):
            n += int(p.ds_tensor.numel())
        elif hasattr(p, "to_local"):
            n += int(p.to_local().numel())
        else:
            n += int(p.numel())
    return n


def _fault_requested(step: int, rank: int) -> str | None:
    """TRAINING_FAULT='kill:RANK:STEP' kills that rank after STEP, on the first attempt only
    (the supervisor exports TRAINING_ATTEMPT). Used by the restart test and for fire drills."""
    spec = os.environ.get("TRAINING_FAULT", "")
    if not spec or os.environ.get("TRAINING_ATTEMPT", "0") != "0":
        return None
    kind, r, s = spec.split(":")
    return kind if int(r) == rank and int(s) == step else None


def run(args: argparse.Namespace) -> int:
    tcfg = train_config_from_args(args)
    mcfg = model_from_args(args)
    if tcfg.seq_len > mcfg.max_seq_len:
        raise ValueError(f"seq_len {tcfg.seq_len} > model max_seq_len {mcfg.max_seq_len}")
    cuda = torch.cuda.is_available()
    # NCCL flight recorder on even when started without the launcher (which sets the same).
    for key, value in (("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000"), ("TORCH_FR_BUFFER_SIZE", "2000"),
                       ("TORCH_NCCL_DUMP_ON_TIMEOUT", "1"), ("TORCH_NCCL_ENABLE_TIMING", "1"),
                       ("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", str(args.run_dir / "nccl_trace" / "rank_"))):
        os.environ.setdefault(key, value)
    if cuda:
        (args.run_dir / "nccl_trace").mkdir(parents=True, exist_ok=True)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if cuda else "gloo", device_id=device if cuda else None)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(tcfg.seed)
    run_dir: Path = args.run_dir
    ckpt_root = run_dir / "checkpoints"
    metrics = JobMetricsWriter(run_dir, rank, world, args.job_name, args.prom_dir)

    fitted = plan_before_start(args, mcfg, tcfg, world, device, metrics, rank)  # before anything is built
    if fitted is None:
        metrics.close()
        dist.destroy_process_group()
        return 3
    tcfg = fitted
    resume_from = latest_complete(ckpt_root) if args.resume == "auto" else None
    extras = read_extras(resume_from) if resume_from is not None else []
    data = plan_data([e.loader for e in extras], world, rank, args.resize_batch == "keep") if extras else DataResume()
    per_stream = tcfg.grad_accum
    tcfg = replace(tcfg, grad_accum=per_stream * len(data.streams)) if data.streams else tcfg
    t0 = time.monotonic()
    engine = build_engine(args.engine, mcfg, tcfg, device, init_from=args.init_from)
    metrics.event("built", engine=args.engine, model=mcfg.name, params=mcfg.num_params(), world=world,
                  local_params=local_param_count(engine.model), seconds=time.monotonic() - t0, train=asdict(tcfg))

    start_step = 0
    loader_state: LoaderState | None = None
    prepared_dir = prepared_data_dir(args.data)
    files = discover_files(args.data) if args.data and prepared_dir is None and not zeros_data(args.data) else []
    if resume_from is not None:
        engine.load(resume_from)  # ZeRO-3 on another world size: through a universal checkpoint
        start_step = extras[0].step
        if any(e.step != start_step for e in extras):
            raise RuntimeError(f"{resume_from}: ranks disagree on the step")
        if len(extras) == world:
            restore_rng(extras[rank].torch_rng, extras[rank].cuda_rng)
        loader_state = data.state
        if data.reshard:
            # Restart on fewer (or more) hosts: what was left to read is dealt out again.
            old = data.reshard
            if prepared_dir is not None:
                loader_state = reshard_prepared(old, world)[rank]
            else:
                loader_state = reshard_states(old, files, world)[rank] if files else None
        metrics.event("resumed", checkpoint=str(resume_from), step=start_step, old_world=len(extras),
                      streams=[s.rank for s in data.streams])
        if rank == 0:
            log(f"resumed from {resume_from} at step {start_step} (saved by {len(extras)} ranks, now {world})")

    if data.streams:  # --resize-batch keep: this rank runs several old ranks' streams, in turn
        source = interleave([open_source(args, mcfg, tcfg, st, st.rank, st.world, start_step, files, prepared_dir)
                             for st in data.streams], per_stream, rank, world)
    else:
        source = open_source(args, mcfg, tcfg, loader_state, rank, world, start_step, files, prepared_dir)
    prefetch = Prefetcher(source, depth=2)

    peak = peak_tflops(torch.cuda.get_device_name(device)) if cuda else None
    # a device the table lacks (e.g. a CPU run measured against its own matmul rate): the peak given per rank
    peak = float(os.environ.get("TRAINING_PEAK_TFLOPS") or 0) or peak
    flops_tok = mcfg.flops_per_token(tcfg.seq_len)
    gc_ctl = GcController(tcfg.gc_every)
    goodput = GoodputMeter(flops_tok, peak)
    detector = SlowStepDetector(tcfg.slow_step_factor, tcfg.slow_step_window, run_dir / "stacks", rank,
                                dumps_first=tcfg.slow_step_dumps_first,
                                dump_interval_s=tcfg.slow_step_dump_interval_s)
    tokens_per_step = tcfg.micro_batch * tcfg.seq_len * tcfg.grad_accum
    watch = JobWatch.for_run(run_dir, device, args.job_name, args.prom_dir, mcfg.name, args.engine, world,
                             tcfg.checkpoint_every, tokens_per_step, flops_tok, peak)  # training/breakdown.py
    last_state: LoaderState | None = None
    step = start_step
    end_step = tcfg.steps if not args.max_steps_this_run else min(tcfg.steps, start_step + args.max_steps_this_run)
    attention = _sdpa_preference(args.sdpa) if cuda else contextlib.nullcontext()
    try:
        attention.__enter__()
        while step < end_step:
            step += 1
            saving = bool(_pending_marks)  # the last step overlapped an asynchronous checkpoint write
            if _pending_marks and engine.saved():
                # Rank 0's save completes only after every rank's shard is written (DCP's final
                # gather; DeepSpeed's save ends in a barrier), so rank 0 alone can mark it.
                _finalise_pending(ckpt_root, rank, tcfg.keep_checkpoints)
            gc_ctl.step(step)
            if cuda:
                torch.cuda.reset_peak_memory_stats(device)
            detector.begin(step)
            t = time.perf_counter()
            pairs = [next(prefetch) for _ in range(tcfg.grad_accum)]
            data_seconds = time.perf_counter() - t
            watch.begin(step, saving)
            last_state = pairs[-1][1]
            lr = lr_at(step, tcfg)
            profiling = profiled_step(step, args.run_dir / "profile", rank == 0) if step == args.profile_step \
                else contextlib.nullcontext()
            with profiling:
                loss, gnorm = engine.train_step([b for b, _ in pairs], lr)
            seconds = time.perf_counter() - t
            slow = detector.end(seconds)
            watch.end(step, seconds, data_seconds)
            goodput.add(tokens_per_step)
            logging = step % tcfg.log_every == 0 or step == end_step
            rec = _step_record(step, loss, gnorm, lr, seconds, data_seconds, tokens_per_step, flops_tok, peak,
                               device if cuda else None, slow, goodput if logging else None)
            metrics.step(rec, detector.slow_steps)
            if rank == 0 and logging:
                log(_step_line(rec))
            # The last step of this run is saved too: the end of training, or the cap of
            # --max-steps-this-run (else a capped run loses up to checkpoint_every - 1 steps).
            if tcfg.checkpoint_every > 0 and (step % tcfg.checkpoint_every == 0 or step == end_step):
                if rank == 0:  # before the save, which may mark the checkpoint complete
                    write_hf_files(step_dir(ckpt_root, step), mcfg, args.tokenizer)
                _save(engine, ckpt_root, step, rank, world, last_state, tcfg.keep_checkpoints, metrics)
            fault = _fault_requested(step, rank)
            if fault == "kill":
                engine.wait_saved()
                _finalise_pending(ckpt_root, rank, tcfg.keep_checkpoints)
                log(f"rank {rank}: TRAINING_FAULT kill after step {step}")
                os.kill(os.getpid(), signal.SIGKILL)
    finally:
        attention.__exit__(None, None, None)
        prefetch.close()
        detector.close()
        watch.close()
        gc_ctl.close()
    engine.wait_saved()
    _finalise_pending(ckpt_root, rank, tcfg.keep_checkpoints)
    metrics.event("finished", step=step)
    metrics.close()
    dist.barrier()
    dist.destroy_process_group()
    return 0


def _step_record(step: int, loss: float, gnorm: float, lr: float, seconds: float, data_seconds: float,
                 tokens: int, flops_tok: float, peak: float | None, device: torch.device | None, slow: bool,
                 goodput: GoodputMeter | None) -> StepRecord:
    """One step's record; `goodput` is given on logging steps, whose interval it closes."""
    tps = tokens / seconds
    alloc = peak_mem = reserved = 0.0
    retries = 0
    if device is not None:
        alloc = torch.cuda.memory_allocated(device) / 2**30
        peak_mem = torch.cuda.max_memory_allocated(device) / 2**30
        reserved = torch.cuda.max_memory_reserved(device) / 2**30
        retries = int(torch.cuda.memory_stats(device).get("num_alloc_retries", 0))
    good, interval = goodput.close_interval() if goodput is not None else (None, 0.0)
    return StepRecord(step, loss, gnorm, lr, seconds, tokens, tps, mfu(tps, flops_tok, peak), alloc, peak_mem, slow,
                      data_seconds=data_seconds, mem_reserved_gb=reserved, alloc_retries=retries,
                      host=socket.gethostname(), goodput_mfu=good, interval_seconds=interval)


def _step_line(rec: StepRecord) -> str:
    m = f" mfu {rec.mfu:.1%}" if rec.mfu is not None else ""
    g = f" goodput {rec.goodput_mfu:.1%}" if rec.goodput_mfu is not None else ""
    return (f"step {rec.step} loss {rec.loss:.4f} gnorm {rec.grad_norm:.3f} lr {rec.lr:.2e} "
            f"{rec.step_seconds * 1e3:.0f} ms (data {rec.data_seconds * 1e3:.0f} ms) "
            f"{rec.tokens_per_s_per_gpu:,.0f} tok/s/gpu{m}{g} mem {rec.mem_peak_gb:.1f} GiB "
            f"(reserved {rec.mem_reserved_gb:.1f}, retries {rec.alloc_retries}){' SLOW' if rec.slow else ''}")


def write_hf_files(path: Path, mcfg: ModelConfig, tokenizer: Path | None) -> None:
    """config.json (and the tokenizer's files) beside a checkpoint, so `merge CKPT DIR` writes a
    folder transformers loads."""
    from training.hf import hf_config
    from training.merge import TOKENIZER_FILES

    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(hf_config(mcfg), indent=2) + "\n")
    if tokenizer is not None:
        shutil.copyfile(tokenizer, path / "tokenizer.json")
        for name in TOKENIZER_FILES[1:]:  # the configs saying which tokens are BOS/EOS, when beside it
            if (tokenizer.parent / name).exists():
                shutil.copyfile(tokenizer.parent / name, path / name)


def _sdpa_preference(name: str) -> contextlib.AbstractContextManager[object]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    # Only the named kernel: a shape it cannot take fails loudly instead of silently falling back.
    only = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}.get(name)
    return sdpa_kernel([only]) if only is not None else contextlib.nullcontext()


_pending_marks: list[Path] = []


def _finalise_pending(root: Path, rank: int, keep: int) -> None:
    while _pending_marks:
        path = _pending_marks.pop(0)
        if rank == 0:
            mark_complete(root, path, keep)


def _save(engine: Engine, root: Path, step: int, rank: int, world: int, loader: LoaderState | None, keep: int,
          metrics: MetricsWriter) -> None:
    t = time.perf_counter()
    # At most one save in flight: the previous one must be on disk (and marked) first.
    engine.wait_saved()
    _finalise_pending(root, rank, keep)
    path = step_dir(root, step)
    cpu, cu = capture_rng()
    write_extra(path, rank, ExtraState(step, loader or LoaderState(0, 0, rank, world), cpu, cu, engine.name, world))
    engine.save(path)
    _pending_marks.append(path)
    if engine.saved():  # already on disk (a small checkpoint can be): mark it now
        _finalise_pending(root, rank, keep)
    metrics.event("checkpoint", step=step, path=str(path), blocking_seconds=time.perf_counter() - t)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training train")
    add_train_args(p)
    try:
        return run(p.parse_args(argv))
    except CheckpointRefused as e:  # a checkpoint that would run code when read: one line, nothing run
        print(f"error: {e}", file=sys.stderr)
        return 2


def describe(args: argparse.Namespace) -> str:
    return json.dumps({"config": args.config, "engine": args.engine, "train": asdict(train_config_from_args(args))})
