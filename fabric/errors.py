"""Errors of the fabric tooling: one tree under the project's BringupError.

`FabricError` is what the CLI turns into one readable line and exit code 1 (provision/command/exits.py's table).
"""

from __future__ import annotations

from provision.errors import BringupError


class FabricError(BringupError):
    """Base of every error raised by the fabric package."""


class ParseError(FabricError):
    """A capture (ibnetdiscover, iblinkinfo, UFM JSON) could not be read; names the line and what was expected."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        self.source = source
        self.line = line
        self.detail = message
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {message}")


class DesignError(FabricError):
    """A cabling design file is invalid; carries every problem found, not just the first."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        head = f"{path}: {problems[0]}" if len(problems) == 1 else f"{path}: {len(problems)} problems"
        lines = [head] + ([f"  {p}" for p in problems] if len(problems) > 1 else [])
        super().__init__("\n".join(lines))


class GeneratorError(FabricError):
    """Fat-tree generator parameters that cannot produce a valid design."""


class DiscoveryError(FabricError):
    """Live discovery (ibnetdiscover on this host) failed or timed out."""
