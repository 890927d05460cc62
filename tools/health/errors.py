"""The agent's error classes. Checks turn ParseError into an "unknown" outcome; ConfigError stops the run."""

from __future__ import annotations


class HealthAgentError(Exception):
    """Base of every error the health agent raises on purpose."""


class ConfigError(HealthAgentError):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid health config: " + "; ".join(problems))
        self.problems = problems


class ParseError(HealthAgentError):
    """A tool's output did not have the shape its parser knows: the check cannot tell."""
