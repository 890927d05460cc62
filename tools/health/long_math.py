"""Pure arithmetic of the long checks (shared by the GPU worker and the agent's verdicts)."""

from __future__ import annotations

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
