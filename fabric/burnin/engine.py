"""Which routing engine programmed the forwarding tables, from the subnet manager's own log.

OpenSM tries the engines it was given (`-R ftree`, or `routing_engine` in opensm.conf) in turn; one that
cannot route this fabric logs `ucast_mgr_route: <engine>: cannot build ...` (ftree on a fabric it does
not see as a fat tree: "Fabric topology is not a fat-tree", "more than one root"), and the next one, or
the default minhop, routes it instead: `<engine> tables configured on all switches` names the one whose
tables the switches hold (osm_ucast_mgr.c, osm_ucast_mgr_process). Nothing in `dump_lfts` says which it
was, and it changes which links carry traffic, so a fallback is a warning in the plan.

Without the log, a site whose SM is UFM's says it through UFM's SM configuration (`fabric.ufm.smconf`): the
engines asked for (`routing_engine`) and the one active (`routing_engine_active`); `engine_from_sm_config`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabric.parsers.common import printable
from fabric.ufm.smconf import SmConfig

_USED = re.compile(r"osm_ucast_mgr_process: (\S+) tables configured on all switches")
_FAILED = re.compile(r"ucast_mgr_route: (\S+): (cannot .*)$")
_WHY = re.compile(r"(Fabric topology is not a fat-tree|ERR [0-9A-F]{4}: .*)$")
_NONE = "No routing engine able to successfully configure"
MAX_LOG = 64 * 1024 * 1024


@dataclass(frozen=True)
class RoutingEngine:
    used: str | None  # the engine whose tables the switches hold (None: the log never says)
    failed: tuple[str, ...]  # engines that were tried first and could not route the fabric
    why: tuple[str, ...]  # what opensm said about it (a few lines, shown escaped)
    source: str

    @property
    def fell_back(self) -> bool:
        return bool(self.failed) and self.used not in self.failed

    def warning(self) -> str | None:
        if self.used is None:
            return (f"{self.source}: does not say which routing engine configured the switches"
                    f"{' (' + '; '.join(self.why) + ')' if self.why else ''}: the plan trusts the tables as dumped")
        if not self.fell_back:
            return None
        return (f"{self.source}: opensm could not route this fabric with {', '.join(self.failed)} "
                f"({'; '.join(self.why) or 'no reason logged'}) and fell back to {self.used}: the tables are "
                f"{self.used}'s, which spread traffic over other links than {self.failed[0]} would; fix the "
                f"fabric (or give {self.failed[0]} its root GUIDs) and route again if that is not what you want")

    def to_dict(self) -> dict[str, object]:
        return {"used": self.used, "failed": list(self.failed), "fell_back": self.fell_back, "why": list(self.why),
                "source": self.source}


def parse_opensm_log(text: str, source: str = "opensm.log") -> RoutingEngine:
    """The last routing pass of the log: the engine it configured and those that failed before it."""
    used: str | None = None
    failed: list[str] = []
    why: list[str] = []
    for line in text.splitlines():
        if (m := _FAILED.search(line)) is not None:
            if used is not None:  # a new routing pass
                used, failed, why = None, [], []
            if m.group(1) not in failed:
                failed.append(m.group(1))
            why.append(printable(f"{m.group(1)}: {m.group(2)}", 120))
        elif (m := _USED.search(line)) is not None:
            used = m.group(1)
        elif _NONE in line:
            used = None
        elif "Entering MASTER state" in line:
            why = []  # what discovery complained of before routing is not why an engine failed
        elif (m := _WHY.search(line)) is not None and used is None and len(why) < 4:
            why.append(printable(m.group(1), 120))
    return RoutingEngine(used, tuple(failed), tuple(why) if failed else (), source)


def engine_from_sm_config(config: SmConfig, source: str) -> RoutingEngine:
    """The engine UFM's OpenSM routes with; the engines asked for before it are those that could not."""
    if config.active is None:
        asked = f"asks for {', '.join(config.requested)} but " if config.requested else ""
        return RoutingEngine(None, (), (f"UFM's SM configuration {asked}names no routing_engine_active",), source)
    if config.active in config.requested:
        failed = config.requested[:config.requested.index(config.active)]
    else:
        failed = config.requested
    why = (f"UFM's SM configuration asks for {','.join(config.requested)}; routing_engine_active is "
           f"{config.active}",) if failed else ()
    return RoutingEngine(config.active, failed, why, source)


def engine_unread(source: str, error: str) -> RoutingEngine:
    """The engine is unknown: the source could not be read (`error` says why)."""
    return RoutingEngine(None, (), (printable(error, 160),), source)
