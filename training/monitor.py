"""Per-step metrics (loss, grad norm, tokens/s/GPU, MFU, memory) to JSONL and a Prometheus
textfile; slow-step detection with stack dumps on every rank; controlled garbage collection."""

from __future__ import annotations

import faulthandler
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# Dense bf16 tensor-core peaks (TFLOP/s, no sparsity) from the vendors' datasheets.
PEAK_BF16_TFLOPS: dict[str, float] = {
    "H200": 989.0,
    "GH200": 989.0,
    "H100 SXM": 989.0,
    "H100 80GB HBM3": 989.0,
    "H100 NVL": 835.0,
    "H100 PCIe": 756.0,
    "H800": 989.0,
    "A100": 312.0,
    "A800": 312.0,
    "L40S": 362.0,
    "B200": 2250.0,
    "B100": 1750.0,
}


def peak_tflops(device_name: str) -> float | None:
    """Longest matching table key wins ('H100 PCIe' before 'H100')."""
    best: tuple[int, float] | None = None
    for key, value in PEAK_BF16_TFLOPS.items():
        if key.lower() in device_name.lower() and (best is None or len(key) > best[0]):
            best = (len(key), value)
    if best is None and "H100" in device_name:
        return 989.0
    return best[1] if best else None


def mfu(tokens_per_s_per_gpu: float, flops_per_token: float, peak: float | None) -> float | None:
    if not peak:
        return None
    return tokens_per_s_per_gpu * flops_per_token / (peak * 1e12)


@dataclass(frozen=True)
class StepRecord:
    step: int
    loss: float
    grad_norm: float
    lr: float
    step_seconds: float
    tokens: int  # tokens processed by this rank this step (padding included)
    tokens_per_s_per_gpu: float
    mfu: float | None
    mem_allocated_gb: float
    mem_peak_gb: float
    slow: bool
    data_seconds: float = 0.0  # waiting for this step's micro-batches (prefetch queue empty = data-bound)
    mem_reserved_gb: float = 0.0  # the caching allocator's peak reservation this step
    alloc_retries: int = 0  # cudaMalloc retries after freeing the cache, since the start (fragmentation)
    host: str = ""
    goodput_mfu: float | None = None  # over the logging interval's wall time (GC, checkpoints included)
    interval_seconds: float = 0.0  # wall time of that interval (0 on steps that end none)


class GoodputMeter:
    """MFU over wall time: every second between two logging points counts (data waits, GC,
    checkpoint writes, evaluation), not only the timed steps, so periodic stalls show as a drop."""

    def __init__(self, flops_per_token: float, peak_tflops: float | None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.flops_per_token, self.peak = flops_per_token, peak_tflops
        self._clock = clock
        self._start = clock()
        self._tokens = 0

    def add(self, tokens: int) -> None:
        self._tokens += tokens

    def close_interval(self) -> tuple[float | None, float]:
        """(goodput MFU, interval seconds) since the last call, and start the next interval."""
        now = self._clock()
        seconds = now - self._start
        tokens, self._start, self._tokens = self._tokens, now, 0
        if seconds <= 0:
            return None, 0.0
        return mfu(tokens / seconds, self.flops_per_token, self.peak), seconds


class GcController:
    """Automatic GC off; a collection at the same step on every rank, so no rank pauses alone
    (an unsynchronised gen-2 collection on one host stalls every collective: Imbue's MFU drift)."""

    def __init__(self, every: int) -> None:
        self.every = every
        gc.disable()
        gc.collect()
        gc.freeze()

    def step(self, step: int) -> None:
        if self.every > 0 and step % self.every == 0:
            gc.collect(1)

    def close(self) -> None:
        gc.unfreeze()
        gc.enable()


def dump_stacks(out_dir: Path, rank: int, tag: str) -> Path:
    """py-spy when present (native frames too), faulthandler's all-threads dump otherwise."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"stacks_{tag}_rank{rank}.txt"
    pyspy = shutil.which("py-spy")
    if pyspy:
        try:
            r = subprocess.run([pyspy, "dump", "--pid", str(os.getpid())], capture_output=True, text=True,
                               timeout=30, check=False)
            if r.returncode == 0:
                path.write_text(r.stdout)
                return path
        except (OSError, subprocess.TimeoutExpired):
            pass
    with open(path, "w") as f:
        faulthandler.dump_traceback(file=f, all_threads=True)
    return path


StackDumper = Callable[[Path, int, str], Path]


class SlowStepDetector:
    """Flags a step slower than `factor` x the rolling median of the last `window` steps.

    Every step, slow ones included, enters the window: one outlier barely moves the median, while a
    lasting change (a throttled GPU, a slower host) becomes the new baseline within window/2 steps
    instead of flagging every step from then on. Every slow step is counted and reported; stack
    dumps (up to 30 s of py-spy each) are rate-limited: the first `dumps_first`, then at most one
    per `dump_interval_s`.

    A watchdog thread fires while the step is still running, so a rank stuck in a collective is
    caught in the act and every rank (all of them wait on the same collective) dumps its own stacks.
    A step in flight for longer than `hang_after_s` is a hang, and its dump ignores the rate limit:
    each rank's limit runs on its own clock and history, and a hang is exactly when every rank's
    stacks are needed.
    """

    def __init__(self, factor: float, window: int, out_dir: Path, rank: int, warmup: int = 3,
                 dumps_first: int = 3, dump_interval_s: float = 600.0, hang_after_s: float = 120.0,
                 clock: Callable[[], float] = time.monotonic, dump: StackDumper = dump_stacks) -> None:
        self.factor, self.window, self.warmup = factor, window, warmup
        self.times: deque[float] = deque(maxlen=window)
        self.out_dir, self.rank = out_dir, rank
        self.dumps_first, self.dump_interval_s, self.hang_after_s = dumps_first, dump_interval_s, hang_after_s
        self._clock, self._dump = clock, dump
        self.slow_steps = 0
        self.dumps = 0
        self._last_dump: float | None = None
        self._step = -1
        self._start = 0.0
        self._dumped = -1
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="slow-step-watchdog", daemon=True)
        self._thread.start()

    def threshold(self) -> float | None:
        with self._lock:
            if len(self.times) < self.warmup:
                return None
            return self.factor * statistics.median(self.times)

    def begin(self, step: int) -> None:
        with self._lock:
            self._step, self._start = step, self._clock()

    def _claim_dump(self, step: int, hang: bool = False) -> bool:
        """True when this step may dump now: not dumped yet, and within the rate limit (or hung)."""
        with self._lock:
            if self._dumped == step:
                return False
            now = self._clock()
            if not hang and self.dumps >= self.dumps_first and self._last_dump is not None \
                    and now - self._last_dump < self.dump_interval_s:
                return False
            self._dumped, self._last_dump = step, now
            self.dumps += 1
            return True

    def end(self, seconds: float) -> bool:
        """Record a finished step; True when it was slow."""
        thr = self.threshold()
        slow = thr is not None and seconds > thr
        with self._lock:
            step = self._step
            self.times.append(seconds)
        if slow:
            self.slow_steps += 1
            if self._claim_dump(step):
                self._dump(self.out_dir, self.rank, f"step{step}")
        with self._lock:
            self._step = -1
        return slow

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            thr = self.threshold()
            with self._lock:
                step, start = self._step, self._start
            if thr is None or step < 0:
                continue
            running = self._clock() - start
            if running > thr and self._claim_dump(step, hang=running > self.hang_after_s):
                self._dump(self.out_dir, self.rank, f"step{step}_inflight")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


HELP = {
    "training_step": "Last step this rank finished.",
    "training_loss": "Training loss of the last step.",
    "training_grad_norm": "Gradient norm of the last step (before clipping).",
    "training_learning_rate": "Learning rate of the last step.",
    "training_step_seconds": "Wall time of the last step.",
    "training_tokens_per_second_per_gpu": "Tokens per second per GPU over the last step.",
    "training_mfu_ratio": "Model FLOPs utilisation of the last step against the GPU's dense bf16 peak (NaN: unknown).",
    "training_goodput_mfu_ratio": "MFU counting only steps that moved training forward (NaN: unknown).",
    "training_data_wait_seconds": "Time the last step waited for its batch.",
    "training_gpu_memory_reserved_bytes": "GPU memory the caching allocator holds.",
    "training_allocator_retries": "Allocator retries (cudaMalloc failures the allocator recovered from) so far.",
    "training_gpu_memory_allocated_bytes": "GPU memory allocated to tensors.",
    "training_gpu_memory_peak_bytes": "Peak GPU memory allocated to tensors.",
    "training_slow_steps_total": "Steps slower than the job's slow-step threshold.",
}


class MetricsWriter:
    """JSONL (every rank's own file) and a Prometheus textfile per rank, written atomically for the
    node exporter's textfile collector."""

    def __init__(self, run_dir: Path, rank: int, job: str, prom_dir: Path | None = None) -> None:
        self.rank, self.job = rank, job
        run_dir.mkdir(parents=True, exist_ok=True)
        self.jsonl = open(run_dir / f"metrics_rank{rank}.jsonl", "a", buffering=1)  # noqa: SIM115
        self.prom_path = (prom_dir or run_dir) / f"training_rank{rank}.prom"
        self.prom_path.parent.mkdir(parents=True, exist_ok=True)

    def event(self, kind: str, **fields: object) -> None:
        self.jsonl.write(json.dumps({"event": kind, "time": time.time(), "rank": self.rank, **fields}) + "\n")

    def step(self, rec: StepRecord, slow_total: int) -> None:
        self.jsonl.write(json.dumps({"event": "step", "time": time.time(), "rank": self.rank,
                                     **rec.__dict__}) + "\n")
        labels = f'job="{_label(self.job)}",rank="{self.rank}"'
        gauges = {
            "training_step": rec.step,
            "training_loss": rec.loss,
            "training_grad_norm": rec.grad_norm,
            "training_learning_rate": rec.lr,
            "training_step_seconds": rec.step_seconds,
            "training_tokens_per_second_per_gpu": rec.tokens_per_s_per_gpu,
            "training_mfu_ratio": rec.mfu if rec.mfu is not None else float("nan"),
            "training_goodput_mfu_ratio": rec.goodput_mfu if rec.goodput_mfu is not None else float("nan"),
            "training_data_wait_seconds": rec.data_seconds,
            "training_gpu_memory_reserved_bytes": rec.mem_reserved_gb * 2**30,
            "training_allocator_retries": rec.alloc_retries,
            "training_gpu_memory_allocated_bytes": rec.mem_allocated_gb * 2**30,
            "training_gpu_memory_peak_bytes": rec.mem_peak_gb * 2**30,
        }
        lines = []
        for name, value in gauges.items():  # HELP and TYPE for each: `promtool check metrics` wants both
            lines += [f"# HELP {name} {HELP[name]}", f"# TYPE {name} gauge",
                      f"{name}{{{labels}}} {_prom_float(float(value))}"]
        lines += [f"# HELP training_slow_steps_total {HELP['training_slow_steps_total']}",
                  "# TYPE training_slow_steps_total counter", f"training_slow_steps_total{{{labels}}} {slow_total}"]
        tmp = self.prom_path.with_suffix(".prom.tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, self.prom_path)

    def close(self) -> None:
        self.jsonl.close()


def _label(value: str) -> str:
    """A label value as the text format wants it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _prom_float(v: float) -> str:
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
