"""The training job's typed configuration, built once at the edge and handed to the `Trainer`.

Every setting of the job is a field here and a flag of `python -m training train`. The settings the
launchers pass per rank as environment variables (the supervisor and the Slurm script export
`TRAINING_ATTEMPT`, `TRAINING_HOST`; an operator or a test may export the others, which the launcher
forwards) are the fallback of their flag, read in `job_config` and nowhere else: a flag given wins.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from training.configs import ModelConfig, TrainConfig, model_config, recommended_train
from training.fit import MEMORY_FLAGS, FitConfig, add_fit_args

# flag (its argparse dest) -> the environment variable that is its fallback
ENV_FALLBACK = {
    "attempt": "TRAINING_ATTEMPT",
    "host_name": "TRAINING_HOST",
    "peak_tflops": "TRAINING_PEAK_TFLOPS",
    "breakdown_every": "TRAINING_BREAKDOWN_EVERY",
    "host_class": "TRAINING_HOST_CLASS",
    "expected_store": "TRAINING_EXPECTED_STORE",
    "expected_mfu": "TRAINING_EXPECTED_MFU",
    "inject": "TRAINING_INJECT",
    "drill": "TRAINING_FAULT",
    "grad_pool": "TRAINING_GRAD_POOL",
}


@dataclass(frozen=True)
class DataConfig:
    paths: tuple[Path, ...] = ()  # JSONL/text shards or folders, a prepare-data folder, or `zeros`
    tokenizer: Path | None = None
    synthetic: bool = False
    split_documents: bool = True
    keep_batch: bool = False  # --resize-batch keep (training/elastic.py); else reshard


@dataclass(frozen=True)
class ObserveConfig:
    """Metrics, MFU and the diagnosis (training/monitor.py, training/diagnosis/watch.py)."""

    job_name: str = "bringup-train"
    prom_dir: Path | None = None
    peak_tflops: float | None = None  # per rank, for a device the peak table lacks (a CPU run)
    profile_step: int = 0
    breakdown_every: int = 50
    host_name: str = ""  # this rank's host as the job names it ("" : the hostname)
    host_class: str = "default"
    expected_store: Path | None = None  # None: RUN/../expected_steps.json
    expected_mfu: float | None = None


@dataclass(frozen=True)
class JobConfig:
    run_dir: Path
    model: ModelConfig
    train: TrainConfig
    engine: str = "fsdp"
    init_from: Path | None = None  # Hugging Face folder whose weights the run starts from
    data: DataConfig = field(default_factory=DataConfig)
    fit: FitConfig = field(default_factory=FitConfig)
    observe: ObserveConfig = field(default_factory=ObserveConfig)
    resume: bool = True
    max_steps_this_run: int = 0
    sdpa: str = "auto"
    attempt: int = 0  # 0 on the first start, then one more per restart (the launchers count)
    # The worker (training/train.py) reads these two, registering the drill as a step hook and installing the
    # slowdowns around the built trainer, so that the loop and the measurement hold no test code.
    drill: str = ""  # a fire drill, training/drills.py
    inject: str = ""  # slowdowns for drills and tests, training/inject.py
    local_rank: int = 0


def add_train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="model name (llama3_70b, llama3_8b, llama3_1b, tiny, NAME-sliceK); with "
                   "--init-from, the run settings' name only (the shape comes from config.json)")
    p.add_argument("--init-from", type=Path, help="Hugging Face Llama folder (config.json, safetensors): start from "
                   "its weights; its tokenizer.json is the default --tokenizer")
    p.add_argument("--engine", choices=("fsdp", "deepspeed"), default="fsdp")
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--data", type=Path, nargs="*", default=[],
                   help="JSONL/text shards or folders; a folder written by prepare-data; or `zeros` (all-zero tokens)")
    p.add_argument("--tokenizer", type=Path, help="tokenizer.json (required with --data)")
    p.add_argument("--synthetic", action="store_true", help="random tokens (throughput runs)")
    p.add_argument("--split-documents", type=int, choices=(0, 1), default=1)
    p.add_argument("--resume", choices=("auto", "never"), default="auto")
    p.add_argument("--prom-dir", type=Path, help="node exporter textfile directory")
    p.add_argument("--job-name", default="bringup-train")
    p.add_argument("--sdpa", choices=("auto", "cudnn", "flash"), default="auto",
                   help="attention kernel to prefer on GPU (auto: PyTorch's own order)")
    p.add_argument("--profile-step", type=int, default=0,
                   help="profile this step; rank 0 writes RUN/profile/step_N.{json,txt} (0: never)")
    p.add_argument("--max-steps-this-run", type=int, default=0, help="stop after this many steps (0: no limit)")
    p.add_argument("--resize-batch", choices=("reshard", "keep"), default="reshard",
                   help="resumed on fewer ranks: keep the global batch (each rank runs k old ranks' data, "
                   "k x grad-accum) or deal the unread data out again (training/elastic.py)")
    add_fit_args(p)
    env = "; default from the environment's "
    p.add_argument("--attempt", type=int, help="restart number, 0 first" + env + ENV_FALLBACK["attempt"])
    p.add_argument("--host-name", help="this rank's host name ({local_rank} is replaced)" + env
                   + ENV_FALLBACK["host_name"])
    p.add_argument("--peak-tflops", type=float, help="per-rank peak MFU is counted against, for a device the "
                   "peak table lacks" + env + ENV_FALLBACK["peak_tflops"])
    p.add_argument("--breakdown-every", type=int, help="steps per step-time breakdown gather, 0 off (default 50)"
                   + env + ENV_FALLBACK["breakdown_every"])
    p.add_argument("--host-class", help="host class key in the expected-step store" + env
                   + ENV_FALLBACK["host_class"])
    p.add_argument("--expected-store", type=Path, help="what healthy runs learnt (default RUN/../expected_steps.json)"
                   + env + ENV_FALLBACK["expected_store"])
    p.add_argument("--expected-mfu", type=float, help="the site's expected MFU" + env + ENV_FALLBACK["expected_mfu"])
    p.add_argument("--inject", help="slowdowns on the first attempt, training/inject.py" + env
                   + ENV_FALLBACK["inject"])
    p.add_argument("--drill", help="fire drill on the first attempt, kill:RANK:STEP (training/drills.py)" + env
                   + ENV_FALLBACK["drill"])
    for f in fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        default = f.default
        if f.name == "grad_pool":
            p.add_argument(flag, choices=("compute", "reduce-scatter"), default=None,
                           help="FSDP2 gradient buffers (training/engines/fsdp.py)" + env + ENV_FALLBACK["grad_pool"])
        elif isinstance(default, bool):
            p.add_argument(flag, type=int, choices=(0, 1), default=None)
        elif isinstance(default, int | float | str):
            p.add_argument(flag, type=type(default), default=None)


def train_config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The model's recommended run settings, with every flag given on the command line applied."""
    kw: dict[str, object] = {}
    for f in fields(TrainConfig):
        v = getattr(args, f.name, None)
        if v is not None:
            kw[f.name] = bool(v) if isinstance(f.default, bool) else v
    return replace(recommended_train(args.config or ""), **kw)  # type: ignore[arg-type]


def _model(args: argparse.Namespace) -> tuple[ModelConfig, Path | None]:
    """The model's shape and the tokenizer (a Hugging Face folder's own when none is given)."""
    if args.init_from is not None:
        from training.hf import model_config_from_hf

        tok = args.tokenizer
        if tok is None and (args.init_from / "tokenizer.json").exists():
            tok = args.init_from / "tokenizer.json"
        return model_config_from_hf(args.init_from), tok
    if not args.config:
        raise ValueError("--config or --init-from is required")
    return model_config(args.config), args.tokenizer


def _with_environment(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, str | None]:
    """Each environment-backed flag's text: the flag when given, else its variable (empty counts as unset)."""
    out: dict[str, str | None] = {}
    for dest, var in ENV_FALLBACK.items():
        given = getattr(args, dest, None)
        out[dest] = str(given) if given is not None else (environ.get(var) or None)
    return out


def job_config(args: argparse.Namespace, environ: Mapping[str, str]) -> JobConfig:
    """The job's configuration from its flags and, for flags not given, the launcher's environment."""
    model, tokenizer = _model(args)
    raw = _with_environment(args, environ)
    train = train_config_from_args(args)
    if raw["grad_pool"] is not None:
        train = replace(train, grad_pool=str(raw["grad_pool"]))
    if train.seq_len > model.max_seq_len:
        raise ValueError(f"seq_len {train.seq_len} > model max_seq_len {model.max_seq_len}")
    local_rank = int(environ.get("LOCAL_RANK", "0"))  # torchrun's
    host = str(raw["host_name"] or "").replace("{local_rank}", str(local_rank))
    return JobConfig(
        run_dir=args.run_dir, model=model, train=train, engine=args.engine, init_from=args.init_from,
        data=DataConfig(tuple(args.data), tokenizer, bool(args.synthetic), bool(args.split_documents),
                        args.resize_batch == "keep"),
        fit=FitConfig(bool(args.auto_fit), args.gpu_mem,
                      frozenset(n for n in MEMORY_FLAGS if getattr(args, n, None) is not None)),
        observe=ObserveConfig(
            job_name=args.job_name, prom_dir=args.prom_dir,
            peak_tflops=float(raw["peak_tflops"] or 0) or None, profile_step=args.profile_step,
            breakdown_every=int(raw["breakdown_every"] or 50), host_name=host,
            host_class=raw["host_class"] or "default",
            expected_store=Path(raw["expected_store"]) if raw["expected_store"] else None,
            expected_mfu=float(raw["expected_mfu"]) if raw["expected_mfu"] else None),
        resume=args.resume == "auto", max_steps_this_run=args.max_steps_this_run, sdpa=args.sdpa,
        attempt=int(raw["attempt"] or 0), drill=raw["drill"] or "", inject=raw["inject"] or "",
        local_rank=local_rank)
