"""GPU work for the long checks, run as a child process by the interpreter that has PyTorch.

    python3 -m tools.health.gpu_worker stress --seconds 30 --size 8192
    python3 -m tools.health.gpu_worker membw --mib 4096
    python3 -m tools.health.gpu_worker allreduce --sizes-mib 1024,2048,4096 --iters 20

Prints one JSON object on its last line. Exit 0 when it measured, 3 when PyTorch or CUDA is missing
(the agent then reports "unknown"), 1 on any other failure. The verdict is the agent's, not this file's.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any

from .long_math import busbw_gbps, copy_gbps, matmul_tflops, timeline

EXIT_MEASURED = 0
EXIT_FAILED = 1
EXIT_NO_TORCH = 3

# NVLink multicast (NVLS) can take a shared host's GPUs out of service; it stays off wherever this runs.
_SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


class NoTorch(Exception):
    pass


def _torch() -> Any:
    try:
        torch: Any = importlib.import_module("torch")
    except ImportError as exc:
        raise NoTorch(f"torch_missing: {exc}") from exc
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        raise NoTorch("no_cuda: torch sees no CUDA device")
    return torch


def _digest(torch: Any, tensor: Any) -> str:
    data = tensor.detach().contiguous().view(torch.uint8).cpu()
    return hashlib.sha256(data.numpy().tobytes()).hexdigest()


def _versions(torch: Any) -> dict[str, Any]:
    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}


def stress(seconds: float, size: int, batch: int, ceiling: bool) -> dict[str, Any]:
    torch = _torch()
    count = torch.cuda.device_count()
    gen = torch.Generator().manual_seed(20261129)
    a_host = torch.randn(size, size, generator=gen).to(torch.bfloat16)
    b_host = torch.randn(size, size, generator=gen).to(torch.bfloat16)
    devs = []
    for i in range(count):
        dev = torch.device("cuda", i)
        a, b = a_host.to(dev), b_host.to(dev)
        c = torch.empty(size, size, dtype=torch.bfloat16, device=dev)
        with torch.cuda.device(dev):
            for _ in range(3):
                torch.matmul(a, b, out=c)
        devs.append({"dev": dev, "a": a, "b": b, "c": c})
    for i in range(count):
        torch.cuda.synchronize(i)
    for d in devs:
        d["reference"] = _digest(torch, d["c"])
        d["ref_sum"] = torch.sum(d["c"].view(torch.int16), dtype=torch.int64)
        d["sums"] = []
        d["start"] = torch.cuda.Event(enable_timing=True)
        d["end"] = torch.cuda.Event(enable_timing=True)
        d["matmuls"] = 0
    for d in devs:
        with torch.cuda.device(d["dev"]):
            d["start"].record()
        d["marks"] = [d["start"]]
    t0 = time.monotonic()
    pending: list[Any] = []
    snapshot: subprocess.Popen[str] | None = None
    while True:
        done = []
        for d in devs:
            with torch.cuda.device(d["dev"]):
                for _ in range(batch):
                    torch.matmul(d["a"], d["b"], out=d["c"])
                d["matmuls"] += batch
                # A cheap fingerprint of every batch's result: a GPU that errs mid-run differs here.
                d["sums"].append(torch.sum(d["c"].view(torch.int16), dtype=torch.int64))
                ev = torch.cuda.Event(enable_timing=True)
                ev.record()
                d["marks"].append(ev)
                done.append(ev)
        # Keep one batch queued behind the running one, so the GPUs never wait for the host.
        for ev in pending:
            ev.synchronize()
        pending = done
        elapsed_wall = time.monotonic() - t0
        if snapshot is None and elapsed_wall >= max(seconds * 0.8, seconds - 5):
            snapshot = _smi_snapshot()  # runs beside the loop: the GPUs stay busy while it samples
        if elapsed_wall >= seconds:
            break
    for d in devs:
        with torch.cuda.device(d["dev"]):
            d["end"].record()
    for i in range(count):
        torch.cuda.synchronize(i)
    gpus = []
    for i, d in enumerate(devs):
        elapsed = d["start"].elapsed_time(d["end"]) / 1000.0
        consistent = all(bool((s == d["ref_sum"]).item()) for s in d["sums"])
        batch_s = [a.elapsed_time(b) / 1000.0 for a, b in zip(d["marks"], d["marks"][1:], strict=False)]
        gpus.append({
            "index": i, "name": torch.cuda.get_device_name(i), "matmuls": d["matmuls"], "elapsed_s": elapsed,
            "tflops": matmul_tflops(size, d["matmuls"], elapsed), "digest_start": d["reference"],
            "digest_end": _digest(torch, d["c"]), "batches": len(d["sums"]), "batches_consistent": consistent,
            "timeline_tflops": timeline(batch_s, size, batch, window_s=5.0),
        })
    result: dict[str, Any] = {"kind": "stress", "size": size, "dtype": "bf16", "seconds": seconds, "gpus": gpus,
                              "under_load": _smi_lines(snapshot)}
    if ceiling:
        result["ceiling_tflops"] = _ceiling(torch, devs[0], size)
    return result


_SNAPSHOT_FIELDS = (
    "index,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active,"
    "clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown,clocks_event_reasons.sw_thermal_slowdown,"
    "clocks_event_reasons.hw_thermal_slowdown,clocks_event_reasons.hw_power_brake_slowdown"
)


def _smi_snapshot() -> subprocess.Popen[str] | None:
    try:
        return subprocess.Popen(["nvidia-smi", f"--query-gpu={_SNAPSHOT_FIELDS}", "--format=csv"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError:
        return None


def _smi_lines(proc: subprocess.Popen[str] | None) -> list[str]:
    if proc is None:
        return []
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return ["nvidia-smi snapshot timed out"]
    return [line.strip() for line in out.splitlines() if line.strip()]


def _ceiling(torch: Any, d: dict[str, Any], size: int) -> float:
    """One GPU alone, ten back-to-back products after warm-up: the reference rate the stress is held to."""
    with torch.cuda.device(d["dev"]):
        for _ in range(3):
            torch.matmul(d["a"], d["b"], out=d["c"])
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            torch.matmul(d["a"], d["b"], out=d["c"])
        end.record()
        end.synchronize()
        return matmul_tflops(size, 10, start.elapsed_time(end) / 1000.0)


def membw(mib: int, iters: int) -> dict[str, Any]:
    torch = _torch()
    nbytes = mib * 1024 * 1024
    gpus = []
    for i in range(torch.cuda.device_count()):
        dev = torch.device("cuda", i)
        src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        with torch.cuda.device(dev):
            for _ in range(3):
                dst.copy_(src)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                dst.copy_(src)
            end.record()
            end.synchronize()
        elapsed = start.elapsed_time(end) / 1000.0
        ok = bool(torch.equal(src, dst))
        gpus.append({"index": i, "bytes": nbytes, "iters": iters, "elapsed_s": elapsed,
                     "gbps": copy_gbps(nbytes, iters, elapsed), "copy_correct": ok})
        del src, dst
        torch.cuda.empty_cache()
    return {"kind": "membw", "gpus": gpus}


def _allreduce_rank(rank: int, world: int, port: int, sizes: list[int], iters: int, out_path: str) -> None:
    # Any-typed on purpose: this module type-checks without PyTorch's stubs and runs where PyTorch varies.
    torch: Any = importlib.import_module("torch")
    dist: Any = importlib.import_module("torch.distributed")

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    rows = []
    for nbytes in sizes:
        buf = torch.full((nbytes // 4,), float(rank + 1), dtype=torch.float32, device="cuda")
        dist.all_reduce(buf)
        expected = world * (world + 1) / 2
        correct = bool(torch.all(buf == expected).item())
        for _ in range(5):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            dist.all_reduce(buf)
        end.record()
        end.synchronize()
        per_op = torch.tensor([start.elapsed_time(end) / 1000.0 / iters], device="cuda")
        flag = torch.tensor([1.0 if correct else 0.0], device="cuda")
        dist.all_reduce(per_op, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        seconds = float(per_op.item())
        rows.append({"bytes": nbytes, "iters": iters, "time_s": seconds,
                     "algbw_gbps": nbytes / seconds / 1e9, "busbw_gbps": busbw_gbps(nbytes, seconds, world),
                     "correct": bool(flag.item() == 1.0)})
        del buf
        torch.cuda.empty_cache()
    if rank == 0:
        nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
        with open(out_path, "w", encoding="utf-8") as fh:
            json.dump({"kind": "allreduce", "world": world, "dtype": "float32", "nccl": nccl, "results": rows}, fh)
    dist.destroy_process_group()


def allreduce(sizes_mib: list[int], iters: int) -> dict[str, Any]:
    torch = _torch()
    mp: Any = importlib.import_module("torch.multiprocessing")

    world = torch.cuda.device_count()
    if world < 2:
        return {"kind": "allreduce", "world": world, "results": [], "note": "one GPU: nothing to all-reduce"}
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "allreduce.json")
        sizes = [m * 1024 * 1024 for m in sizes_mib]
        mp.spawn(_allreduce_rank, args=(world, port, sizes, iters, out_path), nprocs=world, join=True)
        with open(out_path, encoding="utf-8") as fh:
            result: dict[str, Any] = json.load(fh)
    return result


def main(argv: list[str] | None = None) -> int:
    os.environ.update(_SAFE_ENV)
    parser = argparse.ArgumentParser(prog="gpu_worker")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_stress = sub.add_parser("stress")
    p_stress.add_argument("--seconds", type=float, default=30.0)
    p_stress.add_argument("--size", type=int, default=8192)
    p_stress.add_argument("--batch", type=int, default=20)
    p_stress.add_argument("--ceiling", action="store_true", help="also time one GPU alone (reference rate)")
    p_bw = sub.add_parser("membw")
    p_bw.add_argument("--mib", type=int, default=4096)
    p_bw.add_argument("--iters", type=int, default=20)
    p_ar = sub.add_parser("allreduce")
    p_ar.add_argument("--sizes-mib", default="1024,2048,4096")
    p_ar.add_argument("--iters", type=int, default=20)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "stress":
            result = stress(args.seconds, args.size, args.batch, args.ceiling)
        elif args.cmd == "membw":
            result = membw(args.mib, args.iters)
        else:
            result = allreduce([int(x) for x in args.sizes_mib.split(",") if x], args.iters)
    except NoTorch as exc:
        print(json.dumps({"error": str(exc).split(":", 1)[0], "detail": str(exc)}))
        return EXIT_NO_TORCH
    except Exception as exc:
        traceback.print_exc()
        print(json.dumps({"error": "worker_failed", "detail": f"{type(exc).__name__}: {exc}"}))
        return EXIT_FAILED
    result["versions"] = _versions(importlib.import_module("torch"))
    print(json.dumps(result, sort_keys=True))
    return EXIT_MEASURED


if __name__ == "__main__":
    sys.exit(main())
