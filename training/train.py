"""The training worker, one process per GPU (or per CPU rank under gloo) started by torchrun: the edge
where the command line and the launcher's environment become the job's typed config (training/job_config.py),
the `Trainer` (training/trainer.py) is built once from it, and any fire drill is registered as a step hook."""

from __future__ import annotations

import argparse
import os
import sys

from training.drills import drill_hooks
from training.fit import FitPlanError
from training.job_config import add_train_args, job_config
from training.safe_load import CheckpointRefused
from training.trainer import Trainer

PLAN_STOPPED = 3  # the memory plan stopped the job before anything was built (training/fit.py)


def run(args: argparse.Namespace) -> int:
    cfg = job_config(args, os.environ)
    hooks = drill_hooks(cfg.drill, cfg.attempt)  # a malformed drill fails before the process group is made
    try:
        trainer = Trainer.build(cfg)
    except FitPlanError:
        return PLAN_STOPPED
    trainer.step_hooks.extend(hooks)
    trainer.train()
    trainer.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training train")
    add_train_args(p)
    try:
        return run(p.parse_args(argv))
    except CheckpointRefused as e:  # a checkpoint that would run code when read: one line, nothing run
        print(f"error: {e}", file=sys.stderr)
        return 2

