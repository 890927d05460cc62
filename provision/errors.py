"""The project's error hierarchy: every error a user can see derives from BringupError.

Each external system (Redfish, MAAS, SSH, the IB tools) has its own subclass tree so that callers can
catch one system's failures without catching everything, and the CLI turns any BringupError into one
readable line and exit code 1.
"""

from __future__ import annotations


class BringupError(Exception):
    """Base of every error the tool reports to a user."""


class SiteError(BringupError):
    """The site file is missing, unreadable or invalid."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        super().__init__(self._render())

    def _render(self) -> str:
        if len(self.problems) == 1:
            return f"{self.path}: {self.problems[0]}"
        lines = [f"{self.path}: {len(self.problems)} problems"]
        lines.extend(f"  {p}" for p in self.problems)
        return "\n".join(lines)


class HostSelectionError(BringupError):
    """A `--hosts` pattern that is empty, malformed, or names no host of the site."""


class CredentialError(BringupError):
    """A credential reference could not be resolved (the secret itself is never in the message)."""


class StateError(BringupError):
    """The lifecycle state store refused an operation."""


class IllegalTransition(StateError):
    """A host was asked to move between two states that the lifecycle does not connect."""


class UnknownHost(StateError):
    """A host name that the site file does not declare."""
