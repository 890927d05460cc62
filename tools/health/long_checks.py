"""Long checks (minutes): bf16 matmul stress with bit-identity across GPUs, memory bandwidth, NCCL all-reduce.

The GPU work runs in a child process (gpu_worker) under the interpreter that has PyTorch; without PyTorch
the checks say "unknown", never "ok". The verdicts below are pure and run without a GPU.
"""

from __future__ import annotations

import json
from typing import Any

from .check import LONG, Check, single
from .config import Expectations, LongExpect
from .errors import ParseError
from .long_math import below_peers, busbw_gbps, copy_gbps, digests_agree, matmul_tflops, sustained_tflops
from .outcome import CRITICAL, OK, WARN, Outcome, unknown

STRESS_PROBE = "long-stress"
MEMBW_PROBE = "long-membw"
ALLREDUCE_PROBE = "long-allreduce"

_NO_TORCH = {"torch_missing": "PyTorch is not importable", "no_cuda": "PyTorch sees no CUDA device"}


def _result(output: str, rc: int, check: str) -> dict[str, Any] | Outcome:
    last = next((ln for ln in reversed(output.splitlines()) if ln.strip().startswith("{")), None)
    if last is None:
        raise ParseError(f"worker printed no JSON result (exit {rc})")
    try:
        data = json.loads(last)
    except json.JSONDecodeError as exc:
        raise ParseError(f"worker's last line is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ParseError("worker result is not an object")
    error = data.get("error")
    if error in _NO_TORCH:
        return unknown(check, f"{_NO_TORCH[error]}: long checks cannot run", reason=str(error),
                       evidence=[str(data.get("detail", ""))],
                       remediation="Point long.python in the health config at an interpreter with a CUDA PyTorch "
                       "(the training environment), or install one.")
    if error:
        return unknown(check, f"GPU worker failed: {data.get('detail', error)}", reason="worker_failed",
                       evidence=output.strip().splitlines()[-8:],
                       remediation="Read the traceback in the evidence; a CUDA error here often points at a bad GPU.")
    if rc != 0:
        raise ParseError(f"worker exited {rc} without an error line")
    return data


def _num(row: dict[str, Any], key: str) -> float:
    value = row.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ParseError(f"worker result lacks a number for {key!r}")
    return float(value)


def _long(exp: Expectations) -> LongExpect:
    assert exp.long is not None
    return exp.long


def _per_gpu(output: str, rc: int, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | Outcome:
    data = _result(output, rc, name)
    if isinstance(data, Outcome):
        return data
    gpus = data.get("gpus")
    if not isinstance(gpus, list) or not gpus or not all(isinstance(g, dict) for g in gpus):
        raise ParseError("worker result lists no GPUs")
    return data, gpus


def _stress_rates(data: dict[str, Any], gpus: list[dict[str, Any]]) -> list[tuple[int, float, float]]:
    """(index, whole-run rate, sustained rate) per GPU."""
    size = int(_num(data, "size"))
    rates = []
    for g in gpus:
        whole = matmul_tflops(size, int(_num(g, "matmuls")), _num(g, "elapsed_s"))
        windows = g.get("timeline_tflops") or []
        if not isinstance(windows, list) or not all(isinstance(w, (int, float)) for w in windows):
            raise ParseError(f"GPU {g.get('index')}: timeline_tflops is not a list of numbers")
        rates.append((int(_num(g, "index")), whole, sustained_tflops(whole, [float(w) for w in windows])))
    return rates


def _stress_slow(name: str, exp: Expectations, rates: list[tuple[int, float, float]], capped: bool,
                 evidence: tuple[str, ...], metrics: tuple[tuple[str, float], ...]) -> Outcome | None:
    """WARN for GPUs below the sustained floor, or more than the tolerance below their peers' median."""
    lx = _long(exp)
    floor = lx.stress_tflops_floor
    slow = [(i, s) for i, _, s in rates if s < floor]
    if slow:
        return Outcome(name, WARN, f"{len(slow)} GPU(s) below the site's sustained {floor:g} TFLOP/s floor "
                       f"(slowest {min(r for _, r in slow):.1f})"
                       + ("; a clock event reason was active under load" if capped else ""),
                       reason="stress_tflops_low",
                       evidence=evidence, metrics=metrics,
                       remediation="Read the clock event reasons under load (nvidia-smi -q -d PERFORMANCE): thermal "
                       "or power-brake slowdown points at cooling or power; a lone slow GPU is a straggler. The "
                       "floor is a sustained rate (the short burst before the power cap bites does not count).")
    stragglers = below_peers([(i, s) for i, _, s in rates], lx.stress_peer_tolerance_pct)
    if stragglers:
        return Outcome(name, WARN, f"{len(stragglers)} GPU(s) more than {lx.stress_peer_tolerance_pct:g}% below "
                       "the host's other GPUs under the same load",
                       reason="stress_tflops_straggler",
                       evidence=evidence + tuple(f"GPU {i}: {r:.1f} TFLOP/s sustained, its peers' median "
                                                 f"{m:.1f} ({100 * (1 - r / m):.1f}% below)"
                                                 for i, r, m in stragglers),
                       metrics=metrics,
                       remediation="A GPU slower than its neighbours on the same work is a straggler that slows "
                       "every collective: compare its clocks, power draw and temperature under load with the "
                       "others (nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE), then reseat or RMA it.")
    return None


def parse_stress(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "gpu_stress"
    got = _per_gpu(output, rc, name)
    if isinstance(got, Outcome):
        return got
    data, gpus = got
    size = int(_num(data, "size"))
    floor = _long(exp).stress_tflops_floor
    rates = _stress_rates(data, gpus)
    metrics = tuple((f"stress_tflops_gpu{i}", round(r, 1)) for i, r, _ in rates)
    metrics += tuple((f"stress_sustained_tflops_gpu{i}", round(s, 1)) for i, _, s in rates)
    if "ceiling_tflops" in data:
        metrics += (("matmul_ceiling_tflops", round(_num(data, "ceiling_tflops"), 1)),)
    evidence = tuple(f"GPU {i}: {r:.1f} TFLOP/s bf16 {size}^3 over {g.get('elapsed_s', 0):.1f} s, "
                     f"{g.get('matmuls')} products, {s:.1f} sustained"
                     for (i, r, s), g in zip(rates, gpus, strict=True))
    evidence += tuple(f"GPU {g.get('index')} TFLOP/s per 5 s window: {g.get('timeline_tflops')}" for g in gpus
                      if g.get("timeline_tflops"))
    under_load = [str(x) for x in data.get("under_load") or []]
    evidence += tuple(f"under load: {x}" for x in under_load)
    if len(gpus) < exp.gpu.count:
        return Outcome(name, CRITICAL, f"PyTorch sees {len(gpus)} of {exp.gpu.count} GPUs", reason="missing_gpu",
                       evidence=evidence, metrics=metrics,
                       remediation="A GPU is not usable by CUDA: check nvidia-smi and dmesg, reset or RMA it.")
    mismatch = _bit_mismatch(name, gpus, evidence, metrics)
    if mismatch is not None:
        return mismatch
    capped = any(", Active" in x for x in under_load[1:])
    slow = _stress_slow(name, exp, rates, capped, evidence, metrics)
    if slow is not None:
        return slow
    sustained = [s for _, _, s in rates]
    return Outcome(name, OK, f"{len(rates)} GPU(s) at {min(sustained):.1f}-{max(sustained):.1f} TFLOP/s sustained "
                   f"(floor {floor:g}), bit-identical results", evidence=evidence, metrics=metrics)


def _bit_mismatch(name: str, gpus: list[dict[str, Any]], evidence: tuple[str, ...],
                  metrics: tuple[tuple[str, float], ...]) -> Outcome | None:
    ends = [str(g.get("digest_end")) for g in gpus]
    starts = [str(g.get("digest_start")) for g in gpus]
    drift = [g["index"] for g in gpus
             if g.get("digest_start") != g.get("digest_end") or not g.get("batches_consistent")]
    if digests_agree(starts + ends) and not drift:
        return None
    return Outcome(name, CRITICAL, "GPUs computed different results on the same inputs",
                   reason="gpu_bit_mismatch",
                   evidence=evidence + tuple(f"GPU {g['index']}: start {str(g.get('digest_start'))[:16]} end "
                                             f"{str(g.get('digest_end'))[:16]} batches consistent "
                                             f"{g.get('batches_consistent')}" for g in gpus),
                   metrics=metrics,
                   remediation="A GPU that computes wrong bits silently corrupts training: drain the host, "
                   "run DCGM diag level 3 on it and RMA the GPU that differs.")


def parse_membw(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "gpu_memory_bandwidth"
    got = _per_gpu(output, rc, name)
    if isinstance(got, Outcome):
        return got
    _data, gpus = got
    floor = _long(exp).membw_floor_gbps
    rates = [(int(_num(g, "index")), copy_gbps(int(_num(g, "bytes")), int(_num(g, "iters")), _num(g, "elapsed_s")))
             for g in gpus]
    metrics = tuple((f"membw_gbps_gpu{i}", round(r, 1)) for i, r in rates)
    evidence = tuple(f"GPU {i}: {r:.0f} GB/s device-to-device copy (read + write)" for i, r in rates)
    wrong = [g["index"] for g in gpus if g.get("copy_correct") is not True]
    if wrong:
        return Outcome(name, CRITICAL, f"copy produced wrong data on GPU(s) {wrong}", reason="gpu_memory_corrupt",
                       evidence=evidence, metrics=metrics, remediation="Drain the host and RMA the GPU.")
    slow = [(i, r) for i, r in rates if r < floor]
    if slow:
        return Outcome(name, WARN, f"{len(slow)} GPU(s) below {floor:g} GB/s", reason="membw_low", evidence=evidence,
                       metrics=metrics, remediation="Check memory clocks and ECC/remap state; compare with a "
                       "healthy host of the same model.")
    return Outcome(name, OK, f"{len(rates)} GPU(s) at {min(r for _, r in rates):.0f} GB/s or more (floor {floor:g})",
                   evidence=evidence, metrics=metrics)


def parse_allreduce(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "nccl_allreduce"
    data = _result(output, rc, name)
    if isinstance(data, Outcome):
        return data
    world = int(_num(data, "world"))
    rows = data.get("results")
    if world < 2:
        return Outcome(name, "not_applicable", "one GPU: no all-reduce within the host", reason="not_applicable")
    if world < exp.gpu.count:
        return Outcome(name, CRITICAL, f"all-reduce over {world} of {exp.gpu.count} GPUs", reason="missing_gpu",
                       remediation="A GPU is not usable by CUDA: check nvidia-smi and dmesg.")
    if not isinstance(rows, list) or not rows:
        raise ParseError("all-reduce result lists no sizes")
    floor = _long(exp).allreduce_busbw_floor_gbps
    measured = [(int(_num(r, "bytes")), busbw_gbps(int(_num(r, "bytes")), _num(r, "time_s"), world), r) for r in rows]
    evidence = tuple(f"{b / 2**30:g} GiB: busbw {bw:.1f} GB/s, algbw {b / _num(r, 'time_s') / 1e9:.1f} GB/s"
                     for b, bw, r in measured)
    metrics = tuple((f"allreduce_busbw_gbps_{b // 2**20}mib", round(bw, 1)) for b, bw, _ in measured)
    if any(r.get("correct") is not True for _, _, r in measured):
        return Outcome(name, CRITICAL, "all-reduce returned a wrong sum", reason="allreduce_wrong", evidence=evidence,
                       metrics=metrics, remediation="Drain the host; run the stress check per GPU to find the bad "
                       "GPU or NVLink.")
    low = [(b, bw) for b, bw, _ in measured if bw < floor]
    if low:
        return Outcome(name, WARN, f"bus bandwidth below {floor:g} GB/s at {len(low)} size(s)",
                       reason="allreduce_busbw_low", evidence=evidence, metrics=metrics,
                       remediation="Check NVLink state and errors (nvlink checks), NCCL_* settings and GPU clocks; "
                       "run nccl-tests' all_reduce_perf for the full size sweep.")
    return Outcome(name, OK, f"busbw {min(bw for _, bw, _ in measured):.1f}-{max(bw for _, bw, _ in measured):.1f} "
                   f"GB/s over {world} GPUs (floor {floor:g})", evidence=evidence, metrics=metrics)


def _no_long(exp: Expectations) -> str | None:
    if exp.gpu.count == 0:
        return "site declares no GPUs on this host"
    return None if exp.long is not None else "site file sets no long-check floors for this host"


CHECKS = (
    Check("gpu_stress", LONG, (STRESS_PROBE,), single("gpu_stress", STRESS_PROBE, parse_stress), _no_long),
    Check("gpu_memory_bandwidth", LONG, (MEMBW_PROBE,), single("gpu_memory_bandwidth", MEMBW_PROBE, parse_membw),
          _no_long),
    Check("nccl_allreduce", LONG, (ALLREDUCE_PROBE,), single("nccl_allreduce", ALLREDUCE_PROBE, parse_allreduce),
          _no_long),
)
