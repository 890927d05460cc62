"""Errors of health runs, under the project error (SSH's own are in provision.ssh.errors)."""

from __future__ import annotations

from provision.errors import BringupError


class HealthError(BringupError):
    """A health run could not be planned (bad pattern, a site the agent's config cannot express)."""
