"""Errors of the Slurm client: one tree, so a caller can catch Slurm's failures apart from everything else."""

from __future__ import annotations

from provision.errors import BringupError


class SlurmError(BringupError):
    """Slurm could not be asked, or refused what it was asked."""


class SlurmUnreachable(SlurmError):
    """slurmctld did not answer (down, slow, or its address unreachable): nothing was changed by that call."""


class SlurmRefused(SlurmError):
    """slurmctld answered and refused the request (a node name it does not know, a bad state, no permission)."""


class SlurmAnswerInvalid(SlurmError):
    """A Slurm command answered something that is not what it documents (bad JSON, too large, missing fields)."""


class SlurmNotInstalled(SlurmError):
    """The Slurm client commands are not where the site says (or not on PATH)."""
