"""Issue-18 GPU evidence for one model shape, in one command: a tokenizer and prepared shards made
from a generated corpus, a random Hugging Face Llama saved locally by transformers, then the job from
that folder on the prepared shards (`--init-from`, `--auto-fit 1`), the same settings on synthetic
tokens, transformers' Llama + FSDP2 (bench/training_baseline_hf.py), and transformers' mean token loss
on the job's first batch. One JSON line per case in OUT/summary.jsonl; each job's metrics.jsonl and
report.png under OUT/<case>/.

    python3 bench/training_real_data.py --out $OUT --model llama3_1b --budget 540
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "de", "fa", "gu", "he")
         for b in ("n", "r", "s", "t", "m", "l", "x", "", "ko", "la", "ve", "zu")]

# model -> (baseline micro-batch, baseline AC, job flags beyond --auto-fit, extra job cases)
CASES: dict[str, tuple[int, str, list[str], list[tuple[str, list[str]]]]] = {
    "llama3_1b": (4, "none", ["--micro-batch", "4", "--grad-accum", "1", "--loss-chunk-tokens", "16384"], []),
    "llama3_8b": (2, "full", ["--micro-batch", "2", "--grad-accum", "1", "--loss-chunk-tokens", "8192"],
                  [("job_real_full_ac", ["--auto-fit", "0", "--activation-checkpoint", "full",
                                         "--reshard-after-forward", "1"])]),
    "tiny": (2, "none", ["--micro-batch", "2", "--grad-accum", "1", "--seq-len", "128", "--loss-chunk-tokens", "96"],
             []),
}


def make_corpus(out: Path, docs: int, seed: int = 0) -> None:
    """Documents of 20 to 3,000 words drawn with a skewed word distribution (so BPE has merges to learn)."""
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) for i in range(len(WORDS))]
    out.mkdir(parents=True, exist_ok=True)
    for shard in range(4):
        with open(out / f"part{shard}.jsonl", "w") as f:
            for i in range(docs // 4):
                n = int(rng.paretovariate(1.2) * 20) % 3000 + 20
                text = " ".join(rng.choices(WORDS, weights, k=n))
                f.write(json.dumps({"id": f"{shard}-{i}", "text": text}) + "\n")


def save_random_hf(model: str, out: Path, tokenizer: Path) -> None:
    """A random LlamaForCausalLM of the job's shape, made by transformers on the GPU, saved as sharded
    bf16 safetensors with its config.json and the tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from training.configs import model_config
    from training.hf import hf_config

    cfg = hf_config(model_config(model))
    cfg.pop("architectures"), cfg.pop("model_type"), cfg.pop("torch_dtype")
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        m = LlamaForCausalLM(LlamaConfig(**cfg)).to(torch.bfloat16)  # type: ignore[arg-type]
    m.save_pretrained(out, max_shard_size="4GB")
    shutil.copyfile(tokenizer, out / "tokenizer.json")


def reference_loss(hf_dir: Path, data: Path, seq: int, mb: int, seed: int) -> float:
    """transformers' mean token loss on the first batch the job (rank 0 of 1) reads: same tokens,
    same restarting positions, plain causal attention (an all-ones mask stops transformers from
    turning restarting positions into a document mask)."""
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForCausalLM

    from training.prepared import PreparedLoader

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.bfloat16, attn_implementation="sdpa").to(dev)  # type: ignore[arg-type]
    batch, _ = PreparedLoader.fresh_prepared(data, seq, mb, 0, 1, seed, True).next_batch()
    b = batch.to(dev)
    with torch.no_grad():
        logits = model(input_ids=b.input_ids, position_ids=b.position_ids,
                       attention_mask=torch.ones_like(b.input_ids)).logits.float()
    total = F.cross_entropy(logits.flatten(0, 1), b.labels.flatten(), ignore_index=-100, reduction="sum")
    return float(total) / int((b.labels != -100).sum())


def _run(cmd: list[str], log: Path, timeout: float, extra_env: dict[str, str] | None = None) -> tuple[int, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
           "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
           "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}", **(extra_env or {})}
    try:
        r = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=max(timeout, 1), check=False)
        out, rc = r.stdout, r.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), 124
    with open(log, "a") as f:
        f.write(f"\n===== {' '.join(cmd)}\n{out}")
    return rc, out


def job_summary(run_dir: Path) -> dict[str, object]:
    from training.joblog import read_job
    from training.report import plot, summarise

    rows = read_job(run_dir)
    s = summarise(rows)
    if s.get("steps"):
        plot(rows, run_dir / "report.png")
    plans = [r for r in rows if r.get("event") == "plan"]
    if plans and "plan" in plans[-1]:
        s["plan_gib"] = plans[-1]["plan"]["total_gib"]
    built = [r for r in rows if r.get("event") == "built"]
    if built:
        s["train"] = {k: built[-1]["train"][k] for k in ("micro_batch", "grad_accum", "activation_checkpoint",
                                                          "ac_layers", "reshard_after_forward", "loss_chunk_tokens")}
    steps = sorted((r for r in rows if r.get("event") == "step" and r.get("rank") == 0), key=lambda r: r["step"])
    s["losses"] = [round(r["loss"], 5) for r in steps]
    return s


def cases(model: str, hf: Path, data: Path, steps: int, compile_: str) -> list[tuple[str, list[str]]]:
    mb, ac, flags, extra = CASES[model]
    job = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1", "-m", "training",
           "train", "--init-from", str(hf), "--config", model, "--steps", str(steps), "--warmup-steps", "2",
           "--checkpoint-every", "0", "--compile", compile_, "--auto-fit", "1", *flags]
    seq = ["--seq-len", flags[flags.index("--seq-len") + 1]] if "--seq-len" in flags else []
    base = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1",
            str(ROOT / "bench" / "training_baseline_hf.py"), "--model", model, "--batch", str(mb), "--ac", ac,
            "--steps", str(steps), "--warmup", "3", "--seq", seq[1] if seq else "4096"]
    return [("job_real", [*job, "--data", str(data)]), ("job_synthetic", [*job, "--synthetic"]),
            ("hf_baseline", base), *((name, [*job, "--data", str(data), *more]) for name, more in extra)]


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--model", choices=sorted(CASES), required=True)
    p.add_argument("--work", type=Path, default=Path("/tmp/real_data"))
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--docs", type=int, default=4000)
    p.add_argument("--budget", type=float, default=540.0)
    p.add_argument("--compile", default="1")
    p.add_argument("--only", default="", help="comma-separated case names to run (default: all)")
    p.add_argument("--extra", action="append", default=[], help="NAME:FLAGS, another job case on the prepared data")
    p.add_argument("--no-reference", action="store_true")
    p.add_argument("--step", choices=("all", "make-hf", "reference"), default="all")
    p.add_argument("--micro-batch", type=int, default=0)
    p.add_argument("--seq", type=int, default=4096)
    return p.parse_args()


def _setup(a: argparse.Namespace, log: Path) -> int:
    """Corpus, tokenizer and prepared shards, then the random Hugging Face folder (unless there)."""
    corpus, tok, data, hf = a.work / "corpus", a.work / "tokenizer.json", a.work / "prepared", a.work / a.model
    if not data.exists():
        from training.configs import model_config
        from training.tokenizer import train_tokenizer

        make_corpus(corpus, a.docs)
        train_tokenizer(sorted(corpus.glob("*.jsonl")), min(8000, model_config(a.model).vocab_size), tok)
        rc, out = _run([sys.executable, "-m", "training", "prepare-data", "--tokenizer", str(tok), "--input",
                        str(corpus), "--out", str(data)], log, 120)
        if rc:
            print(out[-2000:])
            return rc
    if not hf.exists():  # in a process of its own: this one keeps no CUDA context during the cases
        rc, out = _run([sys.executable, __file__, "--out", str(a.out), "--model", a.model, "--work", str(a.work),
                        "--step", "make-hf"], log, 300)
        if rc:
            print(out[-2000:])
            return rc
    return 0


def _run_case(a: argparse.Namespace, name: str, cmd: list[str], log: Path, left: float) -> dict[str, object]:
    run_dir = a.out / f"{a.model}_{name}"
    # torchrun's elastic agent files under the case's folder, not a torchelastic_* folder per launch in /tmp
    cmd = [*cmd[:3], f"--log-dir={run_dir}/torchelastic", *cmd[3:]]
    if name.startswith("job"):
        cmd = [*cmd, "--run-dir", str(run_dir)]
    t = time.monotonic()
    rc, out = _run(cmd, log, left - 30)
    res: dict[str, object] = {"case": name, "model": a.model, "rc": rc, "wall_seconds": round(time.monotonic() - t, 1),
                              "command": " ".join(c.replace(str(ROOT) + "/", "") for c in cmd[1:])}
    if name.startswith("job"):
        res.update(job_summary(run_dir))
    else:
        lines = [ln for ln in out.splitlines() if ln.startswith("SUMMARY ")]
        res.update(json.loads(lines[-1].removeprefix("SUMMARY ")) if lines else {})
    if rc:
        res["tail"] = out[-1500:]
    return res


def _reference(a: argparse.Namespace, log: Path, real: dict[str, Any]) -> dict[str, object]:
    """transformers' loss on the batch the job's step 1 saw (same micro-batch as the job ran)."""
    _, _, flags, _ = CASES[a.model]
    seq = flags[flags.index("--seq-len") + 1] if "--seq-len" in flags else "4096"
    mb = str(real["train"]["micro_batch"])
    rc, out = _run([sys.executable, __file__, "--out", str(a.out), "--model", a.model, "--work", str(a.work),
                    "--step", "reference", "--micro-batch", mb, "--seq", seq], log, 120)
    lines = [ln for ln in out.splitlines() if ln.startswith("REFERENCE ")]
    ref = json.loads(lines[-1].removeprefix("REFERENCE "))["loss"] if lines else None
    return {"case": "transformers_loss_first_batch", "rc": rc, "loss": ref,
            "job_step1_loss": real["losses"][0] if real.get("losses") else None, "micro_batch": int(mb)}


def main() -> int:
    a = _args()
    if a.step == "make-hf":
        save_random_hf(a.model, a.work / a.model, a.work / "tokenizer.json")
        return 0
    if a.step == "reference":
        loss = reference_loss(a.work / a.model, a.work / "prepared", a.seq, a.micro_batch, 1234)
        print("REFERENCE " + json.dumps({"loss": loss}))
        return 0
    start = time.monotonic()
    a.out.mkdir(parents=True, exist_ok=True)
    log = a.out / f"{a.model}.log"
    rc = _setup(a, log)
    if rc:
        return rc
    manifest = json.loads((a.work / "prepared" / "manifest.json").read_text())
    results: list[dict[str, Any]] = [{"case": "setup", "seconds": round(time.monotonic() - start, 1),
                                      "tokens": manifest.get("total_tokens"),
                                      "documents": manifest.get("total_documents")}]
    todo = cases(a.model, a.work / a.model, a.work / "prepared", a.steps, a.compile)
    job_real = next(cmd for name, cmd in todo if name == "job_real")
    todo += [(spec.split(":", 1)[0], [*job_real, *spec.split(":", 1)[1].split()]) for spec in a.extra]
    only = set(filter(None, a.only.split(",")))
    for name, cmd in (c for c in todo if not only or c[0] in only):
        left = a.budget - (time.monotonic() - start)
        res = _run_case(a, name, cmd, log, left) if left >= 40 else {"case": name, "skipped": "budget spent"}
        results.append(res)
        print(json.dumps({k: v for k, v in res.items() if k not in ("tail", "losses")}), flush=True)
    real = next((r for r in results if r.get("case") == "job_real" and "train" in r), None)
    if real is not None and not a.no_reference and a.budget - (time.monotonic() - start) > 25:
        results.append(_reference(a, log, real))
    with open(a.out / "summary.jsonl", "a") as f:
        for r in results:
            f.write(json.dumps({"model": a.model, "date": time.strftime("%Y-%m-%d"), **r}) + "\n")
    print(json.dumps(results[-1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
