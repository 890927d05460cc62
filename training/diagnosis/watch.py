"""The job's watch, in every rank: the per-rank breakdown around each step and, on rank 0, the diagnosis
over the instant-MFU series after each gather. Settings from the job's `ObserveConfig` (training/job_config.py;
each a flag whose fallback is the environment variable the launcher may pass):

- `breakdown_every` (`TRAINING_BREAKDOWN_EVERY`, default 50): steps per gather (0: off).
- `expected_mfu` (`TRAINING_EXPECTED_MFU`): the site's expected MFU for this model and host class (GPU runs).
- `expected_store` (`TRAINING_EXPECTED_STORE`, default RUN/../expected_steps.json): what healthy runs learnt.
- `host_class` (`TRAINING_HOST_CLASS`, default `default`): the key of the host class in that store.
- `RUN/evidence.json` (written by the supervisor, read on each diagnosis): the job hosts' failing health
  checks and the HCA port counters that rose, `{"health": {host: {check: reason}}, "port_counters": ...}`.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import torch

from training.breakdown import StepBreakdown, Window, describe
from training.diagnosis.classify import Anomaly, Evidence, Expected, RankView, Sample, classify
from training.diagnosis.expected import LearnedStore, key, step_from_mfu
from training.diagnosis.report import AnomalySink
from training.job_config import ObserveConfig

HISTORY = 2000  # steps the diagnosis looks back over
MAX_EVIDENCE_BYTES = 4 << 20


def read_evidence(run_dir: Path) -> Evidence:
    path = run_dir / "evidence.json"
    if not path.is_file() or path.stat().st_size > MAX_EVIDENCE_BYTES:
        return Evidence()
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError:
        return Evidence()
    health = raw.get("health", {}) if isinstance(raw, dict) else {}
    ports = raw.get("port_counters", {}) if isinstance(raw, dict) else {}
    return Evidence({str(h): {str(k): str(v) for k, v in c.items()} for h, c in health.items() if isinstance(c, dict)},
                    {str(h): {str(k): int(v) for k, v in c.items()} for h, c in ports.items() if isinstance(c, dict)})


class JobWatch:
    def __init__(self, run_dir: Path, breakdown: StepBreakdown, job: str, prom_dir: Path | None, model_key: str,
                 checkpoint_every: int, expected: Expected | None, store: LearnedStore) -> None:
        self.run_dir, self.checkpoint_every = run_dir, checkpoint_every
        self.breakdown = breakdown
        self.rank = self.breakdown.rank
        self.key, self.store = model_key, store
        self.expected = expected or store.get(model_key)
        self.sink = AnomalySink(run_dir, job, prom_dir)
        self.samples: list[Sample] = []
        self.windows: list[Window] = []
        self.anomalies: list[Anomaly] = []
        self._last: tuple[int, float] | None = None

    @classmethod
    def for_run(cls, run_dir: Path, device: torch.device, observe: ObserveConfig, model: str, engine: str,
                world: int, checkpoint_every: int, tokens_per_step: int, flops_per_token: float,
                peak_tflops: float | None) -> JobWatch:
        store = LearnedStore(observe.expected_store or run_dir.parent / "expected_steps.json")
        mfu = observe.expected_mfu
        expected = step_from_mfu(mfu, tokens_per_step, flops_per_token, peak_tflops) \
            if mfu and peak_tflops else None
        breakdown = StepBreakdown(observe.breakdown_every, run_dir, device, observe.host_name or None)
        return cls(run_dir, breakdown, observe.job_name, observe.prom_dir,
                   key(model, engine, observe.host_class, world), checkpoint_every, expected, store)

    def begin(self, step: int, saving: bool = False) -> None:
        """`saving`: the previous step overlapped an asynchronous checkpoint write (its sample is labelled
        a checkpoint step, as the one that started the save)."""
        prev_ckpt = self._last is not None and self.checkpoint_every > 0 and self._last[0] % self.checkpoint_every == 0
        now = time.perf_counter()
        if self._last is not None and self.rank == 0:
            prev, t = self._last
            self.samples.append(Sample(prev, now - t, prev_ckpt or saving))
            del self.samples[:-HISTORY]
        self._last = (step, now)
        self.breakdown.begin(step)

    def end(self, step: int, step_s: float, data_s: float) -> list[Anomaly]:
        win = self.breakdown.end(step, step_s, data_s)
        if win is None or self.rank != 0:
            return []
        self.windows.append(win)
        del self.windows[:-HISTORY // max(len(win.steps), 1)]
        print(describe(win), flush=True)
        new = self.sink.emit(self.diagnose())
        self.anomalies += new
        return new

    def view(self) -> RankView:
        wins = self.windows
        return RankView(wins[-1].hosts if wins else (), [w.straggler() for w in wins],
                        [statistics.median(statistics.median(w.busy(r)) for r in range(len(w.hosts))) for w in wins],
                        [statistics.median(statistics.median(c) for c in w.comm_s) for w in wins],
                        [(s, w.hosts[r]) for w in wins for s, r, _ in w.stalls()])

    def diagnose(self) -> list[Anomaly]:
        return classify(self.samples, self.expected, self.view(), read_evidence(self.run_dir))

    def close(self) -> Expected | None:
        """Stop timing; on rank 0, a run with no alert teaches the store its healthy step (first time only)."""
        self.breakdown.close()
        if self.rank != 0 or any(a.alert for a in self.anomalies) or not self.windows:
            return None
        view = self.view()
        walls = [s.wall_s for s in self.samples if not s.checkpoint]
        return self.store.learn(self.key, walls, list(view.busy_s), list(view.comm_s))
