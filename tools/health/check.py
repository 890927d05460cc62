"""A check: the probes it reads and a pure evaluation of their results against the site's expectations."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .config import Expectations
from .errors import ParseError
from .outcome import Outcome, unknown
from .probes import ProbeResult

FAST = "fast"
LONG = "long"

Results = Mapping[str, ProbeResult]
# parse(output, rc, expectations) -> Outcome; may raise ParseError.
Parser = Callable[[str, int, Expectations], Outcome]
Evaluate = Callable[[Results, Expectations], Outcome]


def _always(_exp: Expectations) -> str | None:
    return None


@dataclass(frozen=True)
class Check:
    name: str
    level: str
    probes: tuple[str, ...]
    evaluate: Evaluate
    # Returns why the check does not apply to this host (None: it applies).
    not_applicable: Callable[[Expectations], str | None] = _always


def could_not_run(check: str, result: ProbeResult) -> Outcome:
    return unknown(
        check,
        f"could not read the host: {result.failure}",
        reason=result.failure_kind,
        remediation="Install the tool or fix its permissions, then run the check again.",
        evidence=[line for line in result.output.splitlines()[:5] if line.strip()],
    )


def unparseable(check: str, probe: str, error: ParseError) -> Outcome:
    return unknown(
        check,
        f"output of {probe} not understood: {error}",
        reason="unparseable_output",
        remediation="Look at the tool's raw output on the host (--record DIR keeps it); the tool may be broken "
        "or a new version may have changed its format.",
    )


def cut_mid_line(output: str) -> bool:
    """Every tool the agent reads ends its output with a newline; text that stops mid-line was cut off."""
    return bool(output) and not output.endswith("\n")


def truncated(check: str, probe: str) -> Outcome:
    return unknown(check, f"output of {probe} ends mid-line (truncated)", reason="truncated_output",
                   remediation="Re-run the check; if the tool's output keeps stopping short, the tool is crashing "
                   "or being killed (see the host's kernel log).")


def single(check: str, probe: str, parse: Parser) -> Evaluate:
    """Evaluation for a check that reads one probe: failures to run and to parse become "unknown"."""

    def evaluate(results: Results, exp: Expectations) -> Outcome:
        result = results[probe]
        if not result.ran:
            return could_not_run(check, result)
        if cut_mid_line(result.output):
            return truncated(check, probe)
        try:
            return parse(result.output, result.rc, exp)
        except ParseError as exc:
            return unparseable(check, probe, exc)

    return evaluate


def run_check(check: Check, results: Results, exp: Expectations) -> Outcome:
    """Evaluate one check; it never raises, and a bug in a parser reads as "unknown", never as healthy."""
    reason = check.not_applicable(exp)
    if reason is not None:
        return Outcome(check.name, "not_applicable", reason, reason="not_applicable")
    try:
        return check.evaluate(results, exp)
    except Exception as exc:
        return unknown(check.name, f"internal error while judging: {type(exc).__name__}: {exc}",
                       reason="agent_error", remediation="Report this agent bug with the --record output.")
