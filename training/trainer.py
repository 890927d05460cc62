"""The training job in one object, as torchtitan shapes it: `Trainer.build` makes everything once from the
job's typed config (training/job_config.py): process group, the memory plan's settings, the checkpoint to
resume from, the engine (FSDP2 or DeepSpeed ZeRO-3) with its model and optimizer, the data, the monitors;
`train_step` runs one optimizer step; `train` runs the loop and `close` ends the job.

The loop knows nothing of drills or tests: whatever must happen after a step (a fire drill's kill,
training/drills.py) is a step hook registered on `step_hooks`, called after the step is recorded and
its checkpoint started; slowdowns injected for drills and tests (training/inject.py) are installed around
the built trainer, in its engine and its collectives' waits.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.distributed as dist

from training.checkpoint import latest_complete, read_extras, restore_rng
from training.checkpoint_writer import CheckpointWriter
from training.configs import ModelConfig, TrainConfig
from training.data import Batch, LoaderState, Prefetcher, discover_files, reshard_states
from training.diagnosis.watch import JobWatch
from training.elastic import DataResume, interleave, open_source, plan_data
from training.engines import Engine, lr_at
from training.fit import FitPlanError, plan_before_start
from training.job_config import JobConfig
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

StepHook = Callable[["Trainer", int], None]  # called with the step just run
Batches = Iterator[tuple[Batch, LoaderState]]


@dataclass(frozen=True)
class StepResult:
    loss: float
    grad_norm: float
    lr: float


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


def _device(cfg: JobConfig) -> torch.device:
    """This rank's device, with the process group made on it (NCCL's flight recorder on even when
    started without the launcher, which sets the same)."""
    cuda = torch.cuda.is_available()
    for key, value in (("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000"), ("TORCH_FR_BUFFER_SIZE", "2000"),
                       ("TORCH_NCCL_DUMP_ON_TIMEOUT", "1"), ("TORCH_NCCL_ENABLE_TIMING", "1"),
                       ("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", str(cfg.run_dir / "nccl_trace" / "rank_"))):
        os.environ.setdefault(key, value)  # read by the process group made below
    device = torch.device("cpu")
    if cuda:
        (cfg.run_dir / "nccl_trace").mkdir(parents=True, exist_ok=True)
        torch.cuda.set_device(cfg.local_rank)
        device = torch.device("cuda", cfg.local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if cuda else "gloo", device_id=device if cuda else None)
    return device


class Trainer:
    def __init__(self, cfg: JobConfig, device: torch.device, metrics: MetricsWriter, engine: Engine,
                 batches: Batches, start_step: int) -> None:
        """`cfg.train`: the settings this run executes (after the memory plan and a resize)."""
        self.cfg, self.device, self.metrics, self.engine = cfg, device, metrics, engine
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.cuda = device.type == "cuda"
        tcfg = cfg.train
        self.step = start_step
        self.end_step = min(tcfg.steps, start_step + cfg.max_steps_this_run) if cfg.max_steps_this_run else tcfg.steps
        self.prefetch = Prefetcher(batches, depth=2)
        self.checkpoints = CheckpointWriter(cfg.run_dir / "checkpoints", engine, self.rank, self.world,
                                            tcfg.keep_checkpoints, metrics, cfg.model, cfg.data.tokenizer)
        self.step_hooks: list[StepHook] = []
        peak = peak_tflops(torch.cuda.get_device_name(device)) if self.cuda else None
        self.peak = cfg.observe.peak_tflops or peak  # given per rank for a device the table lacks (a CPU run)
        self.flops_per_token = cfg.model.flops_per_token(tcfg.seq_len)
        self.tokens_per_step = tcfg.micro_batch * tcfg.seq_len * tcfg.grad_accum
        self.gc = GcController(tcfg.gc_every)
        self.goodput = GoodputMeter(self.flops_per_token, self.peak)
        self.detector = SlowStepDetector(tcfg.slow_step_factor, tcfg.slow_step_window, cfg.run_dir / "stacks",
                                         self.rank, dumps_first=tcfg.slow_step_dumps_first,
                                         dump_interval_s=tcfg.slow_step_dump_interval_s)
        self.watch = JobWatch.for_run(cfg.run_dir, device, cfg.observe, cfg.model.name, cfg.engine, self.world,
                                      tcfg.checkpoint_every, self.tokens_per_step, self.flops_per_token, self.peak)

    @classmethod
    def build(cls, cfg: JobConfig) -> Trainer:
        """Everything the run needs, once; FitPlanError (recorded, the process group ended) when the memory
        plan stops the job before anything is built."""
        device = _device(cfg)
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(cfg.train.seed)
        metrics = JobMetricsWriter(cfg.run_dir, rank, world, cfg.observe.job_name, cfg.observe.prom_dir)
        try:
            tcfg = plan_before_start(cfg.fit, cfg.engine, cfg.model, cfg.train, world, device, metrics, rank)
        except FitPlanError:
            metrics.close()
            dist.destroy_process_group()
            raise
        ckpt_root = cfg.run_dir / "checkpoints"
        resume_from = latest_complete(ckpt_root) if cfg.resume else None
        extras = read_extras(resume_from) if resume_from is not None else []
        data = plan_data([e.loader for e in extras], world, rank, cfg.data.keep_batch) if extras else DataResume()
        per_stream = tcfg.grad_accum
        if data.streams:
            tcfg = replace(tcfg, grad_accum=per_stream * len(data.streams))
        cfg = replace(cfg, train=tcfg)
        t0 = time.monotonic()
        engine = build_engine(cfg.engine, cfg.model, tcfg, device, init_from=cfg.init_from)
        metrics.event("built", engine=cfg.engine, model=cfg.model.name, params=cfg.model.num_params(), world=world,
                      local_params=local_param_count(engine.model), seconds=time.monotonic() - t0, train=asdict(tcfg))

        start_step = 0
        loader_state: LoaderState | None = None
        paths = cfg.data.paths
        prepared_dir = prepared_data_dir(paths)
        files = discover_files(paths) if paths and prepared_dir is None and not zeros_data(paths) else []
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
            batches = interleave([open_source(cfg.data, cfg.model, tcfg, st, st.rank, st.world, start_step, files,
                                              prepared_dir) for st in data.streams], per_stream, rank, world)
        else:
            batches = open_source(cfg.data, cfg.model, tcfg, loader_state, rank, world, start_step, files,
                                  prepared_dir)
        return cls(cfg, device, metrics, engine, batches, start_step)

    def train_step(self, batches: list[Batch]) -> StepResult:
        """One optimizer step of `self.step` over its micro-batches, at the schedule's learning rate."""
        lr = lr_at(self.step, self.cfg.train)
        profiling = profiled_step(self.step, self.cfg.run_dir / "profile", self.rank == 0) \
            if self.step == self.cfg.observe.profile_step else contextlib.nullcontext()
        with profiling:
            loss, gnorm = self.engine.train_step(batches, lr)
        return StepResult(loss, gnorm, lr)

    def train(self) -> int:
        """Steps until the end of training or this run's cap; the last step is saved too (else a capped
        run would lose up to checkpoint_every - 1 steps). Returns the last step run."""
        tcfg = self.cfg.train
        attention = _sdpa_preference(self.cfg.sdpa) if self.cuda else contextlib.nullcontext()
        try:
            attention.__enter__()
            while self.step < self.end_step:
                self.step += 1
                step = self.step
                saving = self.checkpoints.in_flight  # the last step overlapped an asynchronous checkpoint write
                self.checkpoints.poll()
                self.gc.step(step)
                if self.cuda:
                    torch.cuda.reset_peak_memory_stats(self.device)
                self.detector.begin(step)
                t = time.perf_counter()
                pairs = [next(self.prefetch) for _ in range(tcfg.grad_accum)]
                data_seconds = time.perf_counter() - t
                self.watch.begin(step, saving)
                result = self.train_step([b for b, _ in pairs])
                seconds = time.perf_counter() - t
                self._record(step, result, seconds, data_seconds)
                if tcfg.checkpoint_every > 0 and (step % tcfg.checkpoint_every == 0 or step == self.end_step):
                    self.checkpoints.save(step, pairs[-1][1])
                for hook in self.step_hooks:
                    hook(self, step)
        finally:
            attention.__exit__(None, None, None)
            self.prefetch.close()
            self.detector.close()
            self.watch.close()
            self.gc.close()
        self.checkpoints.flush()
        self.metrics.event("finished", step=self.step)
        return self.step

    def close(self) -> None:
        self.metrics.close()
        dist.barrier()
        dist.destroy_process_group()

    def _record(self, step: int, result: StepResult, seconds: float, data_seconds: float) -> None:
        slow = self.detector.end(seconds)
        self.watch.end(step, seconds, data_seconds)
        self.goodput.add(self.tokens_per_step)
        logging = step % self.cfg.train.log_every == 0 or step == self.end_step
        rec = step_record(step, result, seconds, data_seconds, self.tokens_per_step, self.flops_per_token, self.peak,
                          self.device if self.cuda else None, slow, self.goodput if logging else None)
        self.metrics.step(rec, self.detector.slow_steps)
        if self.rank == 0 and logging:
            log(step_line(rec))


def step_record(step: int, result: StepResult, seconds: float, data_seconds: float, tokens: int, flops_tok: float,
                peak: float | None, device: torch.device | None, slow: bool, goodput: GoodputMeter | None
                ) -> StepRecord:
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
    return StepRecord(step, result.loss, result.grad_norm, result.lr, seconds, tokens, tps, mfu(tps, flops_tok, peak),
                      alloc, peak_mem, slow, data_seconds=data_seconds, mem_reserved_gb=reserved, alloc_retries=retries,
                      host=socket.gethostname(), goodput_mfu=good, interval_seconds=interval)


def step_line(rec: StepRecord) -> str:
    m = f" mfu {rec.mfu:.1%}" if rec.mfu is not None else ""
    g = f" goodput {rec.goodput_mfu:.1%}" if rec.goodput_mfu is not None else ""
    return (f"step {rec.step} loss {rec.loss:.4f} gnorm {rec.grad_norm:.3f} lr {rec.lr:.2e} "
            f"{rec.step_seconds * 1e3:.0f} ms (data {rec.data_seconds * 1e3:.0f} ms) "
            f"{rec.tokens_per_s_per_gpu:,.0f} tok/s/gpu{m}{g} mem {rec.mem_peak_gb:.1f} GiB "
            f"(reserved {rec.mem_reserved_gb:.1f}, retries {rec.alloc_retries}){' SLOW' if rec.slow else ''}")


def _sdpa_preference(name: str) -> contextlib.AbstractContextManager[object]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    # Only the named kernel: a shape it cannot take fails loudly instead of silently falling back.
    only = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}.get(name)
    return sdpa_kernel([only]) if only is not None else contextlib.nullcontext()
