"""Pure arithmetic of the long checks (shared by the GPU worker and the agent's verdicts)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def matmul_tflops(n: int, count: int, seconds: float) -> float:
    """TFLOP/s of ``count`` n x n x n matrix products (2 n^3 floating-point operations each)."""
    if seconds <= 0:
        raise ValueError("elapsed time must be positive")
    return 2.0 * n**3 * count / seconds / 1e12


def copy_gbps(nbytes: int, iters: int, seconds: float) -> float:
    """Device memory bandwidth of ``iters`` copies of ``nbytes``: each byte is read once and written once."""
    if seconds <= 0:
        raise ValueError("elapsed time must be positive")
    return 2.0 * nbytes * iters / seconds / 1e9


def busbw_gbps(nbytes: int, seconds: float, world: int) -> float:
    """nccl-tests' all-reduce bus bandwidth: algbw * 2(n-1)/n, in GB/s (1e9 bytes)."""
    if seconds <= 0 or world < 1:
        raise ValueError("time must be positive and world >= 1")
    return nbytes / seconds / 1e9 * 2.0 * (world - 1) / world


def digests_agree(digests: Sequence[str]) -> bool:
    return len(set(digests)) <= 1


def timeline(batch_seconds: Sequence[float], n: int, products_per_batch: int, window_s: float) -> list[float]:
    """TFLOP/s over consecutive windows of about ``window_s`` (whole batches), to show clocks settling."""
    rates: list[float] = []
    spent = 0.0
    count = 0
    for seconds in batch_seconds:
        spent += seconds
        count += products_per_batch
        if spent >= window_s:
            rates.append(round(matmul_tflops(n, count, spent), 1))
            spent, count = 0.0, 0
    if count and spent > 0:
        rates.append(round(matmul_tflops(n, count, spent), 1))
    return rates


def sustained_tflops(whole_run: float, windows: Sequence[float]) -> float:
    """The rate a GPU holds once its clocks have settled under the power limit.

    The first window carries the short burst before the power cap bites (an H200: 794-812 TFLOP/s for a few
    seconds, then 654-666 at 700 W), so with three windows or more it is left out and the median of the
    rest is the sustained rate; a shorter run has only its whole-run rate.
    """
    settled = list(windows[1:])
    return float(statistics.median(settled)) if len(settled) >= 2 else whole_run


def below_peers(rates: Sequence[tuple[int, float]], tolerance_pct: float) -> list[tuple[int, float, float]]:
    """(index, rate, peers' median) of each GPU more than ``tolerance_pct`` below the median of the others."""
    slow = []
    for i, rate in rates:
        peers = [r for j, r in rates if j != i]
        if not peers:
            continue
        median = float(statistics.median(peers))
        if rate < median * (1.0 - tolerance_pct / 100.0):
            slow.append((i, rate, median))
    return slow
