"""The expected step of a model on a host class: from the expected MFU the job is given (`--expected-mfu`), or
learned from the first healthy run and stored (a JSON file, one entry per model, engine, host class and world
size)."""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import asdict
from pathlib import Path

from training.diagnosis.classify import Expected

MAX_BYTES = 1 << 20


def key(model: str, engine: str, host_class: str, world: int) -> str:
    return f"{model}|{engine}|{host_class}|{world}"


def step_from_mfu(mfu: float, tokens_per_step: int, flops_per_token: float, peak_tflops: float) -> Expected:
    return Expected(tokens_per_step * flops_per_token / (peak_tflops * 1e12 * mfu))


class LearnedStore:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _all(self) -> dict[str, dict[str, float | None]]:
        if not self.path.is_file() or self.path.stat().st_size > MAX_BYTES:
            return {}
        try:
            raw = json.loads(self.path.read_text())
        except json.JSONDecodeError:
            return {}
        return raw if isinstance(raw, dict) else {}

    def get(self, k: str) -> Expected | None:
        row = self._all().get(k)
        step = _opt(row.get("step_s")) if isinstance(row, dict) else None
        if row is None or step is None:
            return None
        return Expected(step, _opt(row.get("busy_s")), _opt(row.get("comm_s")))

    def learn(self, k: str, walls: list[float], busy: list[float], comm: list[float]) -> Expected | None:
        """Store this healthy run's medians unless an entry exists (the first healthy run sets it)."""
        entries = self._all()
        if k in entries or len(walls) < 20:
            return None
        exp = Expected(statistics.median(walls), statistics.median(busy) if busy else None,
                       statistics.median(comm) if comm else None)
        entries[k] = {n: v for n, v in asdict(exp).items() if n != "absolute"}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, self.path)
        return exp


def _opt(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) else None
