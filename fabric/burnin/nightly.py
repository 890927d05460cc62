"""The nightly burn-in: idle golden hosts' links, rotated so every link is burned once every `cycle` nights.

Pure parts: which hosts are idle (golden minus the running job's hostfile), which stages fit the budget
(the stages whose links were burned longest ago first: a link not burned for `cycle - 1` nights is due),
which links to flag (slower than their own history's median by more than 5%, or with new error counts),
and the Prometheus textfile (per link: last Gb/s, errors, nights since burned, flagged).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from fabric.burnin.history import LinkRow

SLOWER_PCT = 5.0
_LABEL_ESCAPE = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")


def parse_budget(text: str) -> float:
    """'2h', '90m', '3600' (seconds) -> seconds."""
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"budget {text!r}: a number with s, m, h or d (2h, 90m)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def hostfile_hosts(text: str) -> set[str]:
    """Host names of a hostfile (DeepSpeed `host slots=N`, MPI `host:N` or one per line; # comments)."""
    out = set()
    for line in text.splitlines()[:100_000]:
        token = line.split("#", 1)[0].strip().split()
        if token:
            out.add(token[0].split(":", 1)[0])
    return out


def nights_since(history: Sequence[LinkRow], today: date) -> int | None:
    burned = [r for r in history if r.night and r.verdict in ("pass", "fail")]
    if not burned:
        return None
    return (today - date.fromisoformat(max(r.night or "" for r in burned))).days


def choose_stages(plan: Mapping[str, Any], history: Mapping[str, Sequence[LinkRow]], today: date, cycle: int,
                  fits: int) -> tuple[list[int], list[str]]:
    """(stage numbers to run tonight, links due that the budget leaves out)."""
    stale: dict[str, int] = {}
    for entry in plan.get("links", []):
        n = nights_since(history.get(entry["link"], ()), today)
        stale[entry["link"]] = cycle if n is None else n
    scores = []
    for i, stage in enumerate(plan.get("stages", []), start=1):
        links = {lk for f in stage for lk in f["links"]}
        scores.append((sum(stale.get(lk, cycle) for lk in links), i, links))
    chosen = sorted(scores, key=lambda s: (-s[0], s[1]))[:max(0, fits)]
    picked = {i for _s, i, _l in chosen}
    covered = set().union(*(links for _s, _i, links in chosen)) if chosen else set()
    due = sorted(lk for lk, n in stale.items() if n >= cycle - 1 and lk not in covered)
    return sorted(picked), due


@dataclass(frozen=True)
class Flag:
    link: str
    name: str
    why: str


def flags(tonight: Iterable[LinkRow], history: Mapping[str, Sequence[LinkRow]]) -> list[Flag]:
    out = []
    for row in tonight:
        before = [r.gbps for r in history.get(row.link, ()) if r.run != row.run and r.gbps is not None]
        if row.errors > 0:
            out.append(Flag(row.link, row.name, f"{row.errors} new error count(s) tonight"))
        if row.gbps is not None and before:
            median = statistics.median(before)
            if row.gbps < median * (1 - SLOWER_PCT / 100):
                out.append(Flag(row.link, row.name, f"{row.gbps:g} Gb/s, {100 * (1 - row.gbps / median):.1f}% below "
                                f"its own median of {median:g} over {len(before)} earlier night(s)"))
        if row.verdict == "fail":
            out.append(Flag(row.link, row.name, f"failed: {row.reason}"))
    return out


def _labels(link: str, name: str) -> str:
    return f'link="{link.translate(_LABEL_ESCAPE)}",name="{name.translate(_LABEL_ESCAPE)}"'


def prometheus(history: Mapping[str, Sequence[LinkRow]], flagged: Iterable[Flag], today: date) -> str:
    """Text exposition format (node exporter's textfile collector): one gauge family per metric."""
    marked = {f.link for f in flagged}
    families = {
        "bringup_burnin_link_gbps": "Last measured burn-in rate over the link (Gb/s)",
        "bringup_burnin_link_errors": "Error counter increments on the link's ports in its last burn-in",
        "bringup_burnin_link_nights_since_burned": "Nights since the link was last burned",
        "bringup_burnin_link_flagged": "1 when tonight's burn-in flagged the link",
    }
    rows: dict[str, list[str]] = {k: [] for k in families}
    for link, hist in sorted(history.items()):
        last = hist[-1]
        labels = _labels(link, last.name)
        n = nights_since(hist, today)
        if last.gbps is not None:
            rows["bringup_burnin_link_gbps"].append(f"bringup_burnin_link_gbps{{{labels}}} {last.gbps:g}")
        rows["bringup_burnin_link_errors"].append(f"bringup_burnin_link_errors{{{labels}}} {last.errors}")
        if n is not None:
            rows["bringup_burnin_link_nights_since_burned"].append(
                f"bringup_burnin_link_nights_since_burned{{{labels}}} {n}")
        rows["bringup_burnin_link_flagged"].append(f"bringup_burnin_link_flagged{{{labels}}} {int(link in marked)}")
    out: list[str] = []
    for name, help_text in families.items():
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", *rows[name]]
    return "\n".join(out) + "\n"
