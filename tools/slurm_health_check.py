"""Slurm's HealthCheckProgram: the health agent's fast level on this node; a critical verdict drains it at once.

slurmd runs it as root every HealthCheckInterval seconds and kills it after 60 s; it must drain the node itself
(REFERENCE-wave3 A3). The drain reason is the shape `provision slurm sync` reads back
(provision/slurm/reasons.py) to record the host failed with that reason:

    bringup-check: xid_79 (2026-12-05 03:12) gpu_xid: Xid 79 on GPU 00000000:00:07.0 (fallen off the bus)

Only `critical` drains: `unhealthy` (usable) and `unknown` (the agent could not tell) never do, and a node
already drained or down (by anyone) is left as it is, so an admin's reason is never overwritten. Standard
library only (Python 3.10, like the agent); runs beside the agent the health_agent role installs.

    python3 -m tools.slurm_health_check --agent-config /etc/bringup/health-expectations.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
from typing import Any

PREFIX = "bringup-check: "
AGENT_TIMEOUT_S = 45.0  # slurmd kills the program at 60 s
SLURM_TIMEOUT_S = 10.0
REASON_LIMIT = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CODE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def one_line(text: str, limit: int = REASON_LIMIT) -> str:
    flat = " ".join(_CONTROL.sub(" ", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def drain_reason(report: dict[str, Any], at: float) -> str | None:
    """The reason to drain with, or None unless the verdict is critical."""
    if report.get("verdict") != "critical":
        return None
    checks = [c for c in report.get("checks") or [] if isinstance(c, dict) and c.get("status") == "critical"]
    first = checks[0] if checks else {}
    code = str(first.get("reason") or "")
    code = code if _CODE.match(code) else "health_critical"
    what = f"{first.get('check', '?')}: {first.get('summary', '')}" if first else "critical verdict"
    minute = time.strftime("%Y-%m-%d %H:%M", time.gmtime(at))
    return one_line(f"{PREFIX}{code} ({minute}) {what}")


def node_name(given: str | None) -> str:
    return given or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def run_agent(config: str, replay: str | None, node: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "tools.health", "--config", config, "--level", "fast", "--json"]
    if replay:
        argv += ["--replay", replay.replace("{node}", node)]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=AGENT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {"verdict": "unknown", "error": f"the agent did not answer within {AGENT_TIMEOUT_S:g} s"}
    try:
        report = json.loads(done.stdout[: 8 << 20])
    except ValueError:
        return {"verdict": "unknown", "error": f"the agent answered no JSON (exit {done.returncode})"}
    return report if isinstance(report, dict) else {"verdict": "unknown", "error": "the agent's report is no object"}


def already_out(node: str, sinfo: str) -> bool:
    """The node is drained, draining, down or failing already (by anyone): leave its reason alone."""
    try:
        done = subprocess.run([sinfo, "-h", "-N", "-n", node, "-o", "%t"], capture_output=True, text=True,
                              timeout=SLURM_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    state = done.stdout.strip().split("\n")[0].rstrip("*~#!%$@^-")
    return state in {"drain", "drng", "drained", "draining", "down", "fail", "failg"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="slurm_health_check", description=__doc__.splitlines()[0])
    parser.add_argument("--agent-config", required=True, help="the expectations JSON the health agent reads")
    parser.add_argument("--replay", help="agent --replay directory ({node}: this node's name); tests and the lab")
    parser.add_argument("--node", help="Slurm node name (default: $SLURMD_NODENAME, else the short host name)")
    parser.add_argument("--scontrol", default="scontrol")
    parser.add_argument("--sinfo", default="sinfo")
    parser.add_argument("--dry-run", action="store_true", help="print the drain, do not make it")
    args = parser.parse_args(argv)
    node = node_name(args.node)
    report = run_agent(args.agent_config, args.replay, node)
    reason = drain_reason(report, time.time())
    if reason is None:
        print(f"{node}: {report.get('verdict', 'unknown')}"
              + (f" ({one_line(str(report['error']))})" if report.get("error") else ""))
        return 0
    if already_out(node, args.sinfo):
        print(f"{node}: critical, already out of service: reason left as it is ({reason})")
        return 1
    if args.dry_run:
        print(f"{node}: would drain: {reason}")
        return 1
    cmd = [args.scontrol, "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=SLURM_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"{node}: critical, drain failed: {one_line(str(exc))}", file=sys.stderr)
        return 2
    if done.returncode != 0:
        print(f"{node}: critical, drain refused: {one_line(done.stderr)}", file=sys.stderr)
        return 2
    print(f"{node}: drained: {reason}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
