"""The training worker, one process per GPU (or per CPU rank under gloo) started by torchrun: the edge
where the command line and the launcher's environment become the job's typed config (training/job_config.py),
the `Trainer` (training/trainer.py) is built once from it, any fire drill is registered as a step hook and any
injected slowdown installed around it (training/inject.py)."""

from __future__ import annotations

import argparse
import os

from training.drills import drill_hooks
from training.exits import UsageError, error_line
from training.fit import FitPlanError
from training.inject import Slowdowns
from training.job_config import add_train_args, job_config
from training.safe_load import CheckpointRefused
from training.trainer import Trainer

PLAN_STOPPED = 3  # the memory plan stopped the job before anything was built (training/fit.py)
# The arguments or the configuration are wrong (an unknown option or model, a malformed drill or value): the
# same on every restart, so the supervisor and the Slurm script give up on it (training/torchrun_report.py).
CONFIG_WRONG = 2


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training train")
    add_train_args(p)
    try:
        args = p.parse_args(argv)
        cfg = job_config(args, os.environ)
        hooks = drill_hooks(cfg.drill, cfg.attempt)  # a malformed drill fails before the process group is made
        slowdowns = Slowdowns(cfg.inject if cfg.attempt == 0 else "")  # and so does a malformed injection
    except (UsageError, ValueError, LookupError) as e:
        error_line(_message(e), argv or [])
        return CONFIG_WRONG
    try:
        with slowdowns:
            trainer = Trainer.build(cfg)
            slowdowns.attach(trainer)
            trainer.step_hooks.extend(hooks)
            trainer.train()
            trainer.close()
    except FitPlanError:
        return PLAN_STOPPED
    except CheckpointRefused as e:  # a checkpoint that would run code when read: one line, nothing run
        error_line(str(e), argv or [])
        return CONFIG_WRONG
    return 0


def _message(e: Exception) -> str:
    return e.args[0] if isinstance(e, KeyError) and len(e.args) == 1 and isinstance(e.args[0], str) else str(e)
