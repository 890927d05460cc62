"""Throughput and memory measurements of the training job on a GPU machine, in one process tree:
each case is a torchrun of `python -m training train --synthetic` (or the Hugging Face baseline),
run in priority order under a time budget; a summary line per case goes to OUT/summary.jsonl.

    python bench/training_gpu_suite.py --out $OUT --budget 540 [--only NAME,NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WARMUP = 3


def job(name: str, model: str, engine: str, gpus: int, mb: int, steps: int = 8, ac: str = "none",
        compile_: int = 0, chunk: int = 0, seq: int = 4096, sdpa: str = "auto", reshard: int = 1, ga: int = 1,
        offload: int = 0, profile: int = 0, buckets: str = "hidden") -> dict[str, object]:
    chunk = chunk or mb * seq
    args = ["-m", "training", "train", "--config", model, "--engine", engine, "--synthetic",
            "--seq-len", str(seq), "--micro-batch", str(mb), "--steps", str(steps), "--warmup-steps", "2",
            "--checkpoint-every", "0", "--activation-checkpoint", ac, "--compile", str(compile_),
            "--loss-chunk-tokens", str(chunk), "--gc-every", "50", "--sdpa", sdpa,
            "--reshard-after-forward", str(reshard), "--grad-accum", str(ga), "--cpu-offload", str(offload),
            "--profile-step", str(profile), "--zero3-buckets", buckets]
    return {"name": name, "kind": "job", "model": model, "engine": engine, "gpus": gpus, "micro_batch": mb,
            "seq": seq, "ac": ac, "compile": compile_, "args": args}


def baseline(name: str, model: str, gpus: int, mb: int, steps: int = 8, seq: int = 4096) -> dict[str, object]:
    args = [str(ROOT / "bench" / "training_baseline_hf.py"), "--model", model, "--seq", str(seq),
            "--batch", str(mb), "--steps", str(steps), "--warmup", str(WARMUP)]
    return {"name": name, "kind": "baseline", "model": model, "engine": "hf+fsdp2", "gpus": gpus,
            "micro_batch": mb, "seq": seq, "ac": "none", "compile": 0, "args": args}


CASES_RUN2 = [
    baseline("hf_baseline_8b_2gpu", "llama3_8b", 2, 2),
    job("fsdp_8b_2gpu_compiled_best_sdpa", "llama3_8b", "fsdp", 2, 2, compile_=1, sdpa="best"),
    job("fsdp_8b_2gpu_compiled_noreshard", "llama3_8b", "fsdp", 2, 2, compile_=1, sdpa="best", reshard=0),
    job("fsdp_8b_2gpu_compiled_noreshard_ga2", "llama3_8b", "fsdp", 2, 2, steps=6, compile_=1, sdpa="best",
        reshard=0, ga=2),
    job("deepspeed_8b_2gpu_best_sdpa", "llama3_8b", "deepspeed", 2, 2, sdpa="best"),
    job("slice70b_4layers_fsdp_2gpu_fullac", "llama3_70b-slice4", "fsdp", 2, 1, steps=5, ac="full"),
    job("fsdp_8b_1gpu_cpu_offload_fullac", "llama3_8b", "fsdp", 1, 1, steps=4, ac="full", offload=1),
]

# Run 3: where the 8B step's time goes (profiled step 5), cuDNN attention forced, and 8B on one H200.
CASES_RUN3 = [
    job("fsdp_8b_2gpu_best_profiled", "llama3_8b", "fsdp", 2, 2, steps=7, compile_=1, reshard=0, ga=2, profile=5),
    job("fsdp_8b_2gpu_best_cudnn_profiled", "llama3_8b", "fsdp", 2, 2, steps=7, compile_=1, reshard=0, ga=2,
        sdpa="cudnn", profile=5),
    job("fsdp_8b_1gpu_fullac", "llama3_8b", "fsdp", 1, 2, steps=6, ac="full", compile_=1),
    job("deepspeed_8b_1gpu_fullac", "llama3_8b", "deepspeed", 1, 1, steps=6, ac="full"),
    baseline("hf_baseline_8b_2gpu", "llama3_8b", 2, 2),
]

# Run 4: ZeRO-3 bucket sizes and compiled element-wise work, against FSDP2's best in the same run.
CASES_RUN4 = [
    job("deepspeed_8b_2gpu_layer_buckets_compiled", "llama3_8b", "deepspeed", 2, 2, steps=7, compile_=1,
        buckets="layer", profile=5),
    job("deepspeed_8b_2gpu_layer_buckets", "llama3_8b", "deepspeed", 2, 2, steps=7, buckets="layer"),
    job("deepspeed_8b_2gpu_hidden_buckets_compiled", "llama3_8b", "deepspeed", 2, 2, steps=7, compile_=1),
    job("fsdp_8b_2gpu_best", "llama3_8b", "fsdp", 2, 2, steps=7, compile_=1, reshard=0, ga=2),
    job("deepspeed_8b_2gpu", "llama3_8b", "deepspeed", 2, 2, steps=7),
    job("deepspeed_1b_2gpu_layer_buckets_compiled", "llama3_1b", "deepspeed", 2, 4, compile_=1, buckets="layer"),
]

# Run 5: ZeRO-3 keeping gathered parameters for backward (FSDP2's reshard_after_forward=False).
CASES_RUN5 = [
    job("deepspeed_8b_2gpu_layer_buckets_keep", "llama3_8b", "deepspeed", 2, 2, steps=9, buckets="layer", reshard=0),
    job("fsdp_8b_2gpu_best", "llama3_8b", "fsdp", 2, 2, steps=9, compile_=1, reshard=0, ga=2),
    job("deepspeed_8b_2gpu_layer_buckets_keep_ga2", "llama3_8b", "deepspeed", 2, 2, steps=7, buckets="layer",
        reshard=0, ga=2),
    job("fsdp_8b_2gpu_compiled", "llama3_8b", "fsdp", 2, 2, steps=9, compile_=1),
    job("deepspeed_8b_2gpu_layer_buckets", "llama3_8b", "deepspeed", 2, 2, steps=9, buckets="layer"),
]

# Run 6: 70B-shaped slices deep enough that activations, not the fixed terms, set the peak.
CASES_RUN6 = [
    job("slice70b_8layers_fsdp_2gpu", "llama3_70b-slice8", "fsdp", 2, 1, steps=5, compile_=1),
    job("slice70b_8layers_deepspeed_2gpu", "llama3_70b-slice8", "deepspeed", 2, 1, steps=5, buckets="layer"),
    job("deepspeed_1b_2gpu_layer_buckets_keep", "llama3_1b", "deepspeed", 2, 4, steps=8, buckets="layer", reshard=0),
]

CASES = [
    job("fsdp_8b_2gpu_compiled", "llama3_8b", "fsdp", 2, 2, compile_=1),
    baseline("hf_baseline_8b_2gpu", "llama3_8b", 2, 2),
    job("deepspeed_8b_2gpu", "llama3_8b", "deepspeed", 2, 2),
    job("fsdp_8b_2gpu_compiled_cudnn", "llama3_8b", "fsdp", 2, 2, compile_=1, sdpa="cudnn"),
    job("slice70b_4layers_fsdp_2gpu", "llama3_70b-slice4", "fsdp", 2, 1, steps=5),
    job("fsdp_1b_2gpu_compiled", "llama3_1b", "fsdp", 2, 4, compile_=1),
    job("deepspeed_1b_2gpu", "llama3_1b", "deepspeed", 2, 4),
    job("fsdp_1b_1gpu_compiled", "llama3_1b", "fsdp", 1, 4, compile_=1),
    job("deepspeed_1b_1gpu", "llama3_1b", "deepspeed", 1, 4),
    job("fsdp_8b_2gpu_eager", "llama3_8b", "fsdp", 2, 2),
    baseline("hf_baseline_1b_2gpu", "llama3_1b", 2, 4),
]


def summarise_job(run_dir: Path, case: dict[str, object]) -> dict[str, object]:
    recs: dict[int, list[dict[str, float]]] = {}
    for f in sorted(run_dir.glob("metrics_rank*.jsonl")):
        rank = int(f.stem.removeprefix("metrics_rank"))
        recs[rank] = [json.loads(line) for line in f.read_text().splitlines() if '"event": "step"' in line]
    r0 = recs.get(0, [])
    timed = [r for r in r0 if r["step"] > WARMUP]
    if not timed:
        return {"error": "no timed steps"}
    sec = statistics.median(r["step_seconds"] for r in timed)
    tok = timed[0]["tokens"]
    mfus = [r["mfu"] for r in timed if r["mfu"] is not None]
    return {"step_seconds": sec, "tokens_per_s_per_gpu": tok / sec,
            "mfu": statistics.median(mfus) if mfus else None,
            "peak_mem_gib": max(r["mem_peak_gb"] for rs in recs.values() for r in rs),
            "losses": [round(r["loss"], 4) for r in r0]}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--budget", type=float, default=540.0, help="seconds for the whole suite")
    p.add_argument("--only", default="")
    p.add_argument("--set", choices=("run1", "run2", "run3", "run4", "run5", "run6"), default="run1")
    p.add_argument("--pick-sdpa", action="store_true", help="time the SDPA kernels first; 'best' cases use the fastest")
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
           "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
           "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
           "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
    only = set(filter(None, a.only.split(",")))
    start = time.monotonic()
    log = open(a.out / "suite.log", "a")  # noqa: SIM115
    best = "auto"
    if a.pick_sdpa:
        r = subprocess.run([sys.executable, str(ROOT / "bench" / "training_sdpa_bench.py")], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120, check=False)
        log.write(r.stdout + r.stderr)
        print(r.stdout, flush=True)
        picks = [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("BEST ")]
        best = picks[0] if picks else "auto"
    sets = {"run1": CASES, "run2": CASES_RUN2, "run3": CASES_RUN3, "run4": CASES_RUN4, "run5": CASES_RUN5,
            "run6": CASES_RUN6}
    for case in sets[a.set]:
        case = {**case, "args": [best if x == "best" else x for x in case["args"]]}  # type: ignore[union-attr]
        if only and case["name"] not in only:
            continue
        left = a.budget - (time.monotonic() - start)
        if left < 45:
            print(f"SKIP {case['name']}: budget spent", flush=True)
            continue
        run_dir = Path(os.environ.get("SUITE_TMP", "/tmp/suite")) / str(case["name"])
        gpus = int(case["gpus"])  # type: ignore[call-overload]
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}",
               f"--log-dir={run_dir}/torchelastic", *case["args"]]  # type: ignore[misc]
        if case["kind"] == "job":
            cmd += ["--run-dir", str(run_dir)]
        t = time.monotonic()
        log.write(f"\n===== {case['name']}: {' '.join(cmd)}\n")
        log.flush()
        try:
            r = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=min(left, 240), check=False)
            out, rc = r.stdout, r.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), 124
        log.write(out)
        log.flush()
        res: dict[str, object] = {k: v for k, v in case.items() if k != "args"}
        res.update({"rc": rc, "wall_seconds": round(time.monotonic() - t, 1),
                    "command": f"torchrun --standalone --nproc-per-node={gpus} " + " ".join(case["args"])})  # type: ignore[arg-type]
        if case["kind"] == "job":
            res.update(summarise_job(run_dir, case))
            for prof in sorted((run_dir / "profile").glob("step_*.json")):
                res["profile"] = json.loads(prof.read_text())
                table = prof.with_suffix(".txt")
                if table.exists():
                    (a.out / f"{case['name']}_{table.name}").write_text(table.read_text())
        else:
            lines = [ln for ln in out.splitlines() if ln.startswith("SUMMARY ")]
            if lines:
                res.update(json.loads(lines[-1].removeprefix("SUMMARY ")))
        if rc != 0:
            res["tail"] = out[-1500:]
        with open(a.out / "summary.jsonl", "a") as f:
            f.write(json.dumps(res) + "\n")
        mfu = res.get("mfu")
        print(f"{case['name']:32} rc={rc} {res.get('tokens_per_s_per_gpu', 0):>10,.0f} tok/s/gpu "
              f"mfu={mfu if mfu is None else f'{mfu:.1%}'} peak={res.get('peak_mem_gib', 0):.1f}GiB "
              f"wall={res['wall_seconds']}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
