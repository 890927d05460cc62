"""Disk usage (``df -P -B1``) and ZFS pool health (``zpool status -p``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .check import FAST, Check, single
from .config import Expectations
from .errors import ParseError
from .outcome import CRITICAL, OK, WARN, Outcome, unknown

DF_PROBE = "df"
ZPOOL_PROBE = "zpool-status"


@dataclass(frozen=True)
class Filesystem:
    source: str
    size: int
    used: int
    available: int
    mount: str

    @property
    def used_pct(self) -> float:
        # df's own rounding: used / (used + available), which leaves out blocks reserved for root.
        total = self.used + self.available
        return 100.0 * self.used / total if total else 0.0


def parse_df(text: str) -> list[Filesystem]:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("# rc=")]
    if len(lines) < 2:
        raise ParseError("df printed no filesystem rows")
    header = lines[0].split()
    # The agent runs df in the C locale; another header means another locale or another tool, which this
    # parser will not guess at.
    if header[:1] != ["Filesystem"] or header[-2:] != ["Mounted", "on"]:
        raise ParseError(f"df header not in the C locale: {lines[0][:80]!r}")
    rows = []
    for line in lines[1:]:
        parts = line.split()
        if len(parts) < 6 or not all(p.isdigit() for p in parts[1:4]) or not parts[4].endswith("%"):
            raise ParseError(f"df row not understood: {line[:80]!r}")
        rows.append(Filesystem(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), " ".join(parts[5:])))
    return rows


def parse_disk(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "disk_usage"
    rows = parse_df(output)
    if rc != 0 and not rows:
        raise ParseError(f"df exited {rc}")
    limit = exp.storage.disk_max_used_pct
    full = [fs for fs in rows if fs.size > 0 and fs.used_pct >= limit]
    worst = max((fs.used_pct for fs in rows if fs.size > 0), default=0.0)
    if full:
        return Outcome(name, WARN, f"{len(full)} filesystem(s) at or above {limit:g}% used", reason="disk_full",
                       evidence=tuple(f"{fs.mount}: {fs.used_pct:.1f}% of {fs.size} bytes" for fs in full),
                       metrics=(("disk_used_pct_max", worst),),
                       remediation="Free space (old checkpoints, container images: `docker system prune`, logs); a "
                       "full disk fails checkpoint writes mid-job.")
    return Outcome(name, OK, f"{len(rows)} filesystem(s), fullest {worst:.1f}% used (limit {limit:g}%)",
                   metrics=(("disk_used_pct_max", worst),))


@dataclass(frozen=True)
class Pool:
    name: str
    state: str
    errors: str
    device_errors: tuple[str, ...]
    # Device lines whose READ/WRITE/CKSUM cells could not be read: the pool cannot be called clean.
    unreadable: tuple[str, ...] = ()


_DEVICE_STATES = ("ONLINE", "DEGRADED", "FAULTED", "OFFLINE", "UNAVAIL", "REMOVED")
# Without -p, zpool status prints counts of 1000 and more the way zfs_nicenum does: "1.50K", "12.3M" (powers of
# 1024). The agent runs `zpool status -p` (exact integers); the suffixes are read for captures made without it.
_COUNT = re.compile(r"^(\d+(?:\.\d+)?)([KMGTPE]?)$")
_SUFFIX_POWER = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}


def zpool_count(cell: str) -> int | None:
    """A READ/WRITE/CKSUM cell as a number; None when it is not one (the caller must not read that as 0)."""
    match = _COUNT.match(cell)
    if not match:
        return None
    scale: int = 1024 ** _SUFFIX_POWER[match.group(2)]
    return round(float(match.group(1)) * scale)


def parse_zpool_status(text: str) -> list[Pool]:
    pools: list[Pool] = []
    blocks = re.split(r"^\s*pool: ", text, flags=re.MULTILINE)[1:]
    for block in blocks:
        name = block.splitlines()[0].strip()
        state = re.search(r"^\s*state: (\S+)", block, flags=re.MULTILINE)
        errors = re.search(r"^errors: (.*)$", block, flags=re.MULTILINE)
        if not state or not errors:
            raise ParseError(f"pool {name}: no state or errors line (truncated output?)")
        bad = []
        unreadable = []
        # Device rows live between "config:" and "errors:"; the prose above (status:, action:) is not read.
        config = re.search(r"^\s*config:\s*$(.*?)^errors: ", block, flags=re.MULTILINE | re.DOTALL)
        if not config:
            raise ParseError(f"pool {name}: no config section before the errors line")
        for line in config.group(1).splitlines():
            parts = line.split()
            if len(parts) < 2 or parts[1] not in _DEVICE_STATES:
                continue
            counts = [zpool_count(p) for p in parts[2:5]]
            if len(counts) < 3 or None in counts:
                unreadable.append(line.strip())
            elif any(counts):
                bad.append(line.strip())
        pools.append(Pool(name, state.group(1), errors.group(1).strip(), tuple(bad), tuple(unreadable)))
    if not pools and "no pools available" not in text:
        raise ParseError("zpool status output holds no pool")
    return pools


def parse_zpool(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "zpool"
    pools = {p.name: p for p in parse_zpool_status(output)}
    missing = [n for n in exp.storage.zpools if n not in pools]
    if missing:
        return Outcome(name, CRITICAL, f"pool(s) not imported: {', '.join(missing)}", reason="zpool_missing",
                       remediation="`zpool import` the pool; check that every disk is visible (lsblk).")
    bad = [p for n, p in pools.items() if n in exp.storage.zpools
           and (p.state != "ONLINE" or p.errors != "No known data errors" or p.device_errors)]
    if bad:
        return Outcome(name, WARN, f"pool(s) unhealthy: {', '.join(p.name for p in bad)}", reason="zpool_unhealthy",
                       evidence=tuple(f"{p.name}: {p.state}; {p.errors}" for p in bad)
                       + tuple(d for p in bad for d in p.device_errors)
                       + tuple(f"counts not readable: {d}" for p in bad for d in p.unreadable),
                       remediation="`zpool status -v`: replace faulted disks (zpool replace), then `zpool clear` and "
                       "scrub.")
    unreadable = [line for n, p in pools.items() if n in exp.storage.zpools for line in p.unreadable]
    if unreadable:
        return unknown(name, f"error counts of {len(unreadable)} device(s) not readable", reason="zpool_counts_unread",
                       evidence=unreadable[:10],
                       remediation="Run `zpool status -p` on the host and read the READ/WRITE/CKSUM columns; "
                       "a newer or older zpool may print them differently.")
    return Outcome(name, OK, f"{len(exp.storage.zpools)} pool(s) ONLINE without errors")


CHECKS = (
    Check("disk_usage", FAST, (DF_PROBE,), single("disk_usage", DF_PROBE, parse_disk)),
    Check("zpool", FAST, (ZPOOL_PROBE,), single("zpool", ZPOOL_PROBE, parse_zpool),
          lambda e: None if e.storage.zpools else "site declares no ZFS pool on this host"),
)
