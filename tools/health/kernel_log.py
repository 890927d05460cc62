"""Kernel log checks: hardware Xid, unexpected SXid, PCIe "bandwidth limited" lines, lines outside the site list.

Xid, SXid and bandwidth-limited lines are read from the journal (``journalctl -k -b``) where it answers: it holds
the whole boot, while the kernel's ring buffer that ``dmesg`` reads wraps on a busy node and loses an early Xid
79. Where the journal is absent, refused or empty (no systemd, a non-root user, a volatile journal that lost the
boot), they are read from ``dmesg -x``. The unexpected-lines check needs each line's level, which only
``dmesg -x`` prints (the journal's text output has none), so it reads dmesg alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .check import FAST, Check, Evaluate, Results, could_not_run, cut_mid_line, truncated, unparseable
from .config import Expectations
from .errors import ParseError
from .outcome import CRITICAL, OK, WARN, Outcome, unknown
from .probes import TOOL_MISSING

DMESG_PROBE = "dmesg"
JOURNAL_PROBE = "journalctl-k"

LEVELS = ("emerg", "alert", "crit", "err", "warn", "notice", "info", "debug")
_WARN_OR_WORSE = set(LEVELS[:5])

_DECODED = re.compile(r"^(?P<fac>[a-z0-9]+)\s*:(?P<lvl>[a-z]+)\s*:\s?(?P<rest>.*)$")
_STAMP = re.compile(
    r"^(\[\s*[\d.]+\]|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\]|"
    r"\d{4}-\d\d-\d\dT[\d:,.]+[+-]\d\d:?\d\d)\s?(?P<msg>.*)$"
)
_JOURNAL = re.compile(r"^(?:.*?\s)?kernel: (?P<msg>.*)$")
_XID = re.compile(r"NVRM: Xid \(PCI:(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>\d+)\b")
# A line the driver logs because of an earlier Xid (e.g. Xid 45 channel teardown) names that Xid:
# "... Ch 00000001 caused by previous Xid 149" (shared/realdata, NVIDIA/open-gpu-kernel-modules#1150).
_CAUSED_BY = re.compile(r"caused by previous Xid (?P<xid>\d+)\b")
# NVLink5 Xids state their severity: "145, RLW_REMAP Nonfatal XC0 i0 Link 02" / "149, NETIR_LINK_EVT Fatal ...".
NVLINK5_XIDS = frozenset(range(144, 151))
_NONFATAL = re.compile(r"\bnon-?fatal\b", re.IGNORECASE)
# "154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)": the action now wanted.
RECOVERY_ACTION_XID = 154
_RECOVERY = re.compile(r"recovery action changed from .*? to (?P<code>0x[0-9A-Fa-f]+)(?: \((?P<name>[^)]*)\))?")
_SXID = re.compile(r"SXid \(PCI:(?P<pci>[0-9A-Fa-f:.]+)\): (?P<sxid>\d+)\b")
_LIMITED = re.compile(r"available PCIe bandwidth, limited by")
_OFF_BUS = re.compile(r"fallen off the bus")


@dataclass(frozen=True)
class LogLine:
    level: str | None  # None where the format carries no level
    message: str
    raw: str


def parse_kernel_log(text: str) -> list[LogLine]:
    """Split a kernel log into lines with level and message; raises ParseError if it is not a kernel log."""
    lines: list[LogLine] = []
    recognised = 0
    total = 0
    for raw in text.splitlines():
        if not raw.strip():
            continue
        total += 1
        level = None
        body = raw
        decoded = _DECODED.match(raw)
        if decoded and decoded.group("lvl") in LEVELS:
            level = decoded.group("lvl")
            body = decoded.group("rest")
        stamp = _STAMP.match(body)
        journal = _JOURNAL.match(body)
        if stamp:
            recognised += 1
            message = stamp.group("msg")
        elif journal:
            recognised += 1
            message = journal.group("msg")
        else:
            if level is not None:
                recognised += 1
            message = body.strip()
        lines.append(LogLine(level, message, raw))
    if total == 0:
        raise ParseError("empty kernel log (a booted kernel always logs)")
    if recognised * 2 < total:
        raise ParseError(f"only {recognised} of {total} lines look like kernel log lines (garbled output?)")
    return lines


def _log(results: Results, check: str) -> tuple[list[LogLine], str] | Outcome:
    """The kernel log from the journal, else from dmesg (module docstring); an Outcome when neither can be read."""
    attempts = []
    for probe in (JOURNAL_PROBE, DMESG_PROBE):
        result = results.get(probe)
        if result is None:
            continue
        if not result.ran:
            attempts.append(could_not_run(check, result))
            continue
        if result.rc != 0:
            attempts.append(unknown(check, f"{probe} exited {result.rc}", reason="probe_failed",
                                    evidence=result.output.strip().splitlines()[:3]))
            continue
        if cut_mid_line(result.output):
            attempts.append(truncated(check, probe))
            continue
        try:
            return parse_kernel_log(result.output), probe
        except ParseError as exc:
            attempts.append(unparseable(check, probe, exc))
    if not attempts:
        return unknown(check, "no kernel log probe ran", reason="probe_missing")
    # A missing journalctl is normal on hosts without systemd; the other source's failure says more.
    reason = next((a.reason for a in attempts if a.reason != TOOL_MISSING), attempts[0].reason)
    return unknown(check, "kernel log unreadable: " + "; ".join(a.summary for a in attempts),
                   reason=reason,
                   remediation="Run the agent as root (the system journal and dmesg are restricted for other "
                   "users); check that systemd-journald runs or that dmesg is installed.")


def from_log(name: str, judge: Callable[[list[LogLine], str, Expectations], Outcome]) -> Evaluate:
    """Evaluation that judges the kernel log (journal, else dmesg); unreadable logs become "unknown"."""

    def evaluate(results: Results, exp: Expectations) -> Outcome:
        got = _log(results, name)
        if isinstance(got, Outcome):
            return got
        return judge(got[0], got[1], exp)

    return evaluate


def recovery_action(message: str) -> str | None:
    """The action an Xid 154 line asks for; None when it is "0x0 (None)". The catalogue's names for the codes
    vary by driver ("PF FLR" / "GPU Reset Required" for 0x1, "OS Reboot" / "Node Reboot Required" for 0x2), so
    the code decides; a line whose action cannot be read asks for one."""
    match = _RECOVERY.search(message)
    if match is None:
        return "recovery action not readable"
    if int(match.group("code"), 16) == 0:
        return None
    return match.group("name") or match.group("code")


def judge_xid(lines: list[LogLine], source: str, exp: Expectations) -> Outcome:
    name = "gpu_xid"
    critical_set = set(exp.kernel_log.xid_critical)
    hardware: list[str] = []
    nonfatal: list[str] = []
    other: list[str] = []
    xids: set[int] = set()
    soft: set[int] = set()
    matches = [(line, _XID.search(line.message)) for line in lines]
    logged = {int(m.group("xid")) for _, m in matches if m}
    latest_action: dict[str, str] = {}  # PCI address -> its last Xid 154 line: the action wanted now
    for line, match in matches:
        if match is None:
            if _OFF_BUS.search(line.message):
                hardware.append(line.message)
            continue
        xid = int(match.group("xid"))
        cause = _CAUSED_BY.search(line.message)
        cause_xid = int(cause.group("xid")) if cause else None
        if xid == RECOVERY_ACTION_XID and xid in critical_set:
            latest_action[match.group("pci")] = line.message
        elif xid in critical_set and xid in NVLINK5_XIDS and _NONFATAL.search(line.message):
            nonfatal.append(line.message)
            soft.add(xid)
        elif xid in critical_set:
            hardware.append(line.message)
            xids.add(xid)
        elif cause_xid is not None and cause_xid in critical_set and cause_xid not in logged:
            # The cause's own line is not in the log (rotated out, or lost); this line is what is left of it.
            hardware.append(line.message)
            xids.add(cause_xid)
        else:
            other.append(line.message)
    for message in latest_action.values():
        if recovery_action(message) is None:
            other.append(message)
        else:
            hardware.append(message)
            xids.add(RECOVERY_ACTION_XID)
    if hardware:
        reason = "xid_" + "_".join(str(x) for x in sorted(xids)) if xids else "gpu_fallen_off_bus"
        return Outcome(name, CRITICAL, f"hardware Xid in the kernel log ({source}): "
                       + (", ".join(str(x) for x in sorted(xids)) or "GPU fallen off the bus"),
                       reason=reason, evidence=tuple(hardware[:10] + nonfatal[:3]),
                       remediation="Drain the host. Look up the Xid in NVIDIA's Xid catalogue (an Xid 154 line names "
                       "the recovery the driver wants: GPU reset or node reboot); reset the GPU (power-cycle) and "
                       "run the long checks; RMA the GPU if it recurs.")
    if nonfatal:
        codes = sorted(soft)
        return Outcome(name, WARN, f"non-fatal NVLink Xid in the kernel log ({source}): "
                       + ", ".join(map(str, codes)), reason="xid_" + "_".join(map(str, codes)) + "_nonfatal",
                       evidence=tuple(nonfatal[:10]),
                       remediation="NVIDIA's catalogue routes these to its NVLink5 error workflow: watch for an Xid "
                       "154 naming a recovery action and for the same link recurring; check the link's error "
                       "counters (nvidia-smi nvlink -e) and the NVSwitch/fabric manager logs.")
    summary = f"no hardware Xid ({source})"
    if other:
        found = sorted({int(m.group("xid")) for m in (_XID.search(x) for x in other) if m})
        summary += f"; application Xid(s) ignored: {', '.join(map(str, found))}"
    return Outcome(name, OK, summary, evidence=tuple(other[:5]))


def judge_sxid(lines: list[LogLine], source: str, exp: Expectations) -> Outcome:
    name = "nvswitch_sxid"
    expected = set(exp.kernel_log.sxid_expected)
    hits: dict[int, list[str]] = {}
    for line in lines:
        match = _SXID.search(line.message)
        if match and int(match.group("sxid")) not in expected:
            hits.setdefault(int(match.group("sxid")), []).append(line.message)
    if not hits:
        return Outcome(name, OK, f"no unexpected SXid ({source})")
    fatal = [s for s, msgs in hits.items() if any(re.search(r"\bFatal\b", m) for m in msgs)]
    evidence = tuple(m for msgs in hits.values() for m in msgs[:3])
    return Outcome(name, CRITICAL if fatal else WARN,
                   f"unexpected SXid(s) {', '.join(map(str, sorted(hits)))}" + (" (fatal)" if fatal else ""),
                   reason="sxid_" + "_".join(map(str, sorted(hits))), evidence=evidence[:10],
                   remediation="Check nvidia-fabricmanager's log and the NVSwitch's links; fatal SXids need a "
                   "host reset; recurring ones a baseboard RMA.")


def judge_pcie_limited(lines: list[LogLine], source: str, exp: Expectations) -> Outcome:
    name = "pcie_bandwidth_limited"
    limited = [line.message for line in lines if _LIMITED.search(line.message)]
    if limited:
        nic = any("mlx5" in m for m in limited)
        return Outcome(name, WARN, f"{len(limited)} device(s) report limited PCIe bandwidth"
                       + (" (mlx5 HCA)" if nic else ""), reason="pcie_bandwidth_limited", evidence=tuple(limited[:8]),
                       remediation="A link trained below its capability: reseat the card or riser, check the slot's "
                       "BIOS bifurcation setting; a NIC at x8 or gen3 cuts IB throughput.")
    return Outcome(name, OK, f"no 'PCIe bandwidth limited' lines ({source})")


def evaluate_unexpected(results: Results, exp: Expectations) -> Outcome:
    name = "kernel_log_unexpected"
    result = results[DMESG_PROBE]
    if not result.ran:
        return could_not_run(name, result)
    if result.rc != 0:
        return unknown(name, f"dmesg exited {result.rc}", reason="probe_failed",
                       evidence=result.output.strip().splitlines()[:3],
                       remediation="Run the agent as root (dmesg is restricted for other users).")
    if cut_mid_line(result.output):
        return truncated(name, DMESG_PROBE)
    try:
        lines = parse_kernel_log(result.output)
    except ParseError as exc:
        return unparseable(name, DMESG_PROBE, exc)
    if not any(line.level for line in lines):
        return unknown(name, "kernel log carries no levels (expected `dmesg -x` output)", reason="unparseable_output")
    patterns = [re.compile(p) for p in exp.kernel_log.expected_patterns]
    serious = [line for line in lines if line.level in _WARN_OR_WORSE]
    odd = [line for line in serious if not any(p.search(line.message) for p in patterns)]
    if odd:
        return Outcome(name, WARN, f"{len(odd)} kernel log line(s) at warning or above outside the site's list",
                       reason="unexpected_kernel_log", evidence=tuple(f"{x.level}: {x.message}" for x in odd[:20]),
                       metrics=(("kernel_log_unexpected_lines", float(len(odd))),),
                       remediation="Read each line: a new hardware fault gets fixed; a harmless line gets a pattern "
                       "in the site file's kernel_log.expected_patterns.")
    return Outcome(name, OK, f"{len(serious)} warning-or-worse line(s), all in the site's list",
                   metrics=(("kernel_log_unexpected_lines", 0.0),))


def _no_gpus(exp: Expectations) -> str | None:
    return None if exp.gpu.count > 0 else "site declares no GPUs on this host"


def _no_nvswitch(exp: Expectations) -> str | None:
    return None if exp.gpu.nvswitch else "site declares no NVSwitch on this host"


CHECKS = (
    Check("gpu_xid", FAST, (DMESG_PROBE, JOURNAL_PROBE), from_log("gpu_xid", judge_xid), _no_gpus),
    Check("nvswitch_sxid", FAST, (DMESG_PROBE, JOURNAL_PROBE), from_log("nvswitch_sxid", judge_sxid), _no_nvswitch),
    Check("pcie_bandwidth_limited", FAST, (DMESG_PROBE, JOURNAL_PROBE),
          from_log("pcie_bandwidth_limited", judge_pcie_limited)),
    Check("kernel_log_unexpected", FAST, (DMESG_PROBE,), evaluate_unexpected),
)
