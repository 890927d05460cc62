"""Command line: ``python3 -m tools.health --config FILE --level fast|long|all [--json] [--textfile PATH]``.

Exit code: 0 healthy, 1 unhealthy but usable, 2 critical (never allocate), 3 unknown (could not tell,
including a bad config, a bad command line and any failure of the agent itself: it never claims a verdict it
did not reach).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import NoReturn

from . import agent, catalog, textfile
from .catalog import CHECKS
from .config import load_config
from .errors import ConfigError
from .outcome import EXIT_CODES, OK, UNKNOWN
from .probe_run import LiveRunner, ReplayRunner


class UsageError(Exception):
    """The command line is wrong (argparse would exit 2, which reads as "critical")."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python3 -m tools.health", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, type=Path, help="expectations JSON rendered by the controller")
    p.add_argument("--level", choices=("fast", "long", "all"), default="fast")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--textfile", type=Path, help="also write a Prometheus textfile (.prom) here, atomically")
    p.add_argument("--replay", type=Path, help="read every probe from DIR/<probe>.out (+ .rc) instead of the host")
    p.add_argument("--record", type=Path, help="write every probe's output to DIR in the replay layout")
    p.add_argument("--root", type=Path, default=Path("/"), help="read /sys and /proc under this root")
    p.add_argument("--only", default="", help="comma-separated check names")
    p.add_argument("--list-checks", action="store_true", help="list the checks and exit")
    return p


def _human(report: agent.Report) -> str:
    out = [f"health {report.level}: {report.verdict.upper()} (exit {report.exit_code}) in {report.duration_s:.2f} s"]
    for o in report.outcomes:
        out.append(f"  {o.status:<14} {o.check:<24} {o.summary}")
        if o.status not in (OK, "not_applicable") and o.remediation:
            out.append(f"  {'':<14} {'':<24} -> {o.remediation}")
    return "\n".join(out)


def _unknown(argv: list[str], error: str, message: str, problems: list[str] | None = None) -> int:
    """Report that the agent reached no verdict: exit 3 (unknown) with the reason, JSON too when asked."""
    with contextlib.suppress(BrokenPipeError):
        if "--json" in argv:
            print(json.dumps({"verdict": UNKNOWN, "exit_code": EXIT_CODES[UNKNOWN], "error": error,
                              "problems": problems if problems is not None else [message]}))
        print(message, file=sys.stderr)
    return EXIT_CODES[UNKNOWN]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(args)
    except ConfigError as exc:
        return _unknown(args, "config", str(exc), exc.problems)
    except UsageError as exc:
        return _unknown(args, "usage", str(exc))
    except KeyboardInterrupt:
        return _unknown(args, "interrupted", "health agent interrupted: no verdict")
    except Exception as exc:  # any failure of the agent itself: unknown, never a verdict it did not reach
        detail = f"{type(exc).__name__}: {exc}"[:500]
        return _unknown(args, "agent_error", f"health agent failed, no verdict: {detail}")


def _check_selection(level: str, only: tuple[str, ...]) -> None:
    """A run that selects no check would report "ok" having looked at nothing: a usage error instead."""
    unknown_names = sorted(set(only) - {c.name for c in CHECKS})
    if unknown_names:
        raise UsageError(f"--only: no such check {', '.join(unknown_names)} (see --list-checks)")
    if only and not catalog.select(level, only):
        raise UsageError(f"--only {','.join(only)}: none of these is a {level} check (see --list-checks)")


def _main(argv: list[str]) -> int:
    if "--list-checks" in argv:
        for c in CHECKS:
            print(f"{c.level:<5} {c.name:<24} probes: {', '.join(c.probes)}")
        return 0
    args = _parser().parse_args(argv)
    exp = load_config(args.config)
    runner = ReplayRunner(args.replay) if args.replay else LiveRunner(root=args.root)
    only = tuple(x for x in args.only.split(",") if x)
    _check_selection(args.level, only)
    report = agent.run(exp, runner, args.level, only, record_dir=args.record)
    if args.textfile:
        textfile.write_atomically(args.textfile, textfile.render(report.outcomes, report.level, report.host,
                                                                  time.time(), report.duration_s))
    # The reader may go away (a pipe into head, a dropped SSH session); the exit code still tells.
    with contextlib.suppress(BrokenPipeError):
        print(json.dumps(report.as_dict(), indent=2) if args.json else _human(report))
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
