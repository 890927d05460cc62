"""Fire drills: a rank that dies on purpose, so the restart path is exercised (the supervisor's and
Slurm's restart tests, and an operator's drill on a real site). A drill is a step hook the edge
registers on the `Trainer` (training/train.py); the training loop itself knows nothing of it.

`kill:RANK:STEP` (`--drill`, or `TRAINING_FAULT` read at the edge): rank RANK, after step STEP of the
first attempt, waits for the checkpoint in flight to be marked and kills itself with SIGKILL.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING

from training.monitor import log

if TYPE_CHECKING:
    from training.trainer import Trainer


@dataclass(frozen=True)
class KillDrill:
    rank: int
    step: int

    def __call__(self, trainer: Trainer, step: int) -> None:
        if trainer.rank != self.rank or step != self.step:
            return
        trainer.checkpoints.flush()
        log(f"rank {trainer.rank}: TRAINING_FAULT kill after step {step}")
        os.kill(os.getpid(), signal.SIGKILL)


def parse_drill(spec: str) -> KillDrill:
    """`kill:RANK:STEP`; ValueError for anything else."""
    kind, sep, rest = spec.partition(":")
    rank, sep2, step = rest.partition(":")
    if kind != "kill" or not sep or not sep2 or not rank.isdigit() or not step.isdigit():
        raise ValueError(f"drill {spec!r}: expected kill:RANK:STEP")
    return KillDrill(int(rank), int(step))


def drill_hooks(spec: str, attempt: int) -> list[KillDrill]:
    """The hooks for `spec` on this attempt: a drill runs on the first attempt only, so the restart runs clean."""
    return [parse_drill(spec)] if spec and attempt == 0 else []
