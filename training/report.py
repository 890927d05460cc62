"""`python -m training report RUN_DIR`: plots of loss, tokens/s per GPU, step MFU and goodput MFU
(and memory) from the job's JSONL into RUN_DIR/report.png, and a printed summary."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from training.joblog import read_job

WARMUP_STEPS = 3  # compilation and allocator warm-up: not in the medians


def _steps(rows: list[dict[str, Any]]) -> dict[int, dict[int, dict[str, Any]]]:
    """rank -> step -> that step's last record (a restarted job logs a step again)."""
    out: dict[int, dict[int, dict[str, Any]]] = {}
    for r in rows:
        if r.get("event") == "step":
            out.setdefault(int(r.get("rank", 0)), {})[int(r["step"])] = r
    return out


def _median_tps(per: dict[int, dict[str, Any]], timed: set[int]) -> float:
    vals = [rec["tokens_per_s_per_gpu"] for s, rec in per.items() if s in timed]
    return statistics.median(vals) if vals else 0.0


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_rank = _steps(rows)
    if not by_rank:
        return {"steps": 0}
    r0 = by_rank.get(0) or next(iter(by_rank.values()))
    steps = sorted(r0)
    timed = [s for s in steps if s > WARMUP_STEPS] or steps
    every = [rec for per in by_rank.values() for rec in per.values()]
    mfus = [r0[s]["mfu"] for s in timed if r0[s].get("mfu") is not None]
    goods = [r0[s]["goodput_mfu"] for s in timed if r0[s].get("goodput_mfu") is not None]
    step_time = sum(r["step_seconds"] for r in every)
    return {
        "steps": len(steps), "first_step": steps[0], "last_step": steps[-1],
        "ranks": len(by_rank), "hosts": sorted({str(r.get("host", "")) for r in every}),
        "first_loss": r0[steps[0]]["loss"], "last_loss": r0[steps[-1]]["loss"],
        "tokens_per_s_per_gpu_median": statistics.median(r0[s]["tokens_per_s_per_gpu"] for s in timed),
        "slowest_rank_tokens_per_s": min(_median_tps(per, set(timed)) for per in by_rank.values()),
        "mfu_median": statistics.median(mfus) if mfus else None,
        "goodput_mfu_mean": statistics.fmean(goods) if goods else None,
        "data_wait_share": sum(r.get("data_seconds", 0.0) for r in every) / step_time if step_time else 0.0,
        "mem_peak_gib_max": max(r.get("mem_peak_gb", 0.0) for r in every),
        "mem_reserved_gib_max": max(r.get("mem_reserved_gb", 0.0) for r in every),
        "alloc_retries_max": max(int(r.get("alloc_retries", 0)) for r in every),
        "slow_steps": sum(1 for r in every if r.get("slow")),
        "checkpoints": sum(1 for r in rows if r.get("event") == "checkpoint"),
        "plan": next((r.get("message") for r in rows if r.get("event") == "plan"), None),
    }


def plot(rows: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_rank = _steps(rows)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    (ax_loss, ax_tps), (ax_mfu, ax_mem) = axes
    for rank, per in sorted(by_rank.items()):
        xs = sorted(per)
        label = f"rank {rank}" if len(by_rank) <= 8 else None
        ax_tps.plot(xs, [per[s]["tokens_per_s_per_gpu"] for s in xs], lw=1, label=label)
        ax_mem.plot(xs, [per[s].get("mem_peak_gb", 0.0) for s in xs], lw=1)
        ax_mem.plot(xs, [per[s].get("mem_reserved_gb", 0.0) for s in xs], lw=1, ls="--")
    r0 = by_rank.get(0) or next(iter(by_rank.values()), {})
    xs = sorted(r0)
    ax_loss.plot(xs, [r0[s]["loss"] for s in xs], color="C0")
    ax_mfu.plot(xs, [100 * r0[s]["mfu"] if r0[s].get("mfu") is not None else float("nan") for s in xs],
                label="step MFU")
    good = [s for s in xs if r0[s].get("goodput_mfu") is not None]
    ax_mfu.plot(good, [100 * r0[s]["goodput_mfu"] for s in good], marker=".", label="goodput MFU")
    ax_loss.set(title="loss", ylabel="loss")
    ax_tps.set(title="tokens/s per GPU")
    ax_mfu.set(title="MFU (torchtitan count)", xlabel="step", ylabel="%")
    ax_mem.set(title="memory per rank: peak allocated (solid), reserved (dashed)", xlabel="step", ylabel="GiB")
    ax_mfu.legend()
    if len(by_rank) > 1:
        ax_tps.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def _fmt(summary: dict[str, Any]) -> str:
    def pct(v: float | None) -> str:
        return f"{v:.1%}" if v is not None else "n/a"

    if not summary.get("steps"):
        return "no steps recorded"
    return "\n".join([
        f"steps {summary['first_step']}-{summary['last_step']} ({summary['steps']}), {summary['ranks']} rank(s) "
        f"on {', '.join(summary['hosts'])}",
        f"loss {summary['first_loss']:.4f} -> {summary['last_loss']:.4f}",
        f"tokens/s/GPU median {summary['tokens_per_s_per_gpu_median']:,.0f} (slowest rank "
        f"{summary['slowest_rank_tokens_per_s']:,.0f}); step MFU {pct(summary['mfu_median'])}, goodput MFU "
        f"{pct(summary['goodput_mfu_mean'])}",
        f"data wait {summary['data_wait_share']:.1%} of step time; memory peak {summary['mem_peak_gib_max']:.1f} "
        f"GiB, reserved {summary['mem_reserved_gib_max']:.1f} GiB, allocator retries {summary['alloc_retries_max']}",
        f"slow steps {summary['slow_steps']}, checkpoints {summary['checkpoints']}",
        *([f"memory plan: {summary['plan']}"] if summary.get("plan") else []),
    ])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training report")
    p.add_argument("run_dir", type=Path, help="the job's --run-dir (or its metrics.jsonl)")
    p.add_argument("--out", type=Path, help="PNG path (default RUN_DIR/report.png)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    a = p.parse_args(argv)
    rows = read_job(a.run_dir)
    summary = summarise(rows)
    if summary["steps"]:
        out = a.out or (a.run_dir.parent if a.run_dir.is_file() else a.run_dir) / "report.png"
        plot(rows, out)
        summary["png"] = str(out)
    print(json.dumps(summary, indent=2) if a.json else _fmt(summary) + (f"\nplot: {summary['png']}"
                                                                         if "png" in summary else ""))
    return 0 if summary["steps"] else 1
