"""UFM's SM configuration (`GET /ufmRest/app/smconf`): which routing engine its OpenSM was asked for and runs.

NVIDIA's UFM Enterprise REST API Guide ("SM Configuration REST API", v6.16 to v6.22) answers the whole OpenSM
configuration as one JSON object of opensm.conf's keys (`sm_priority`, `log_file`, `lfts_file`, ...) and
`routing_engine_active`, the engine OpenSM routes with (`"minhop"` in the guide's example). `routing_engine`
is opensm.conf's own key: the engines asked for, tried in turn, comma separated (`ftree,updn`; opensm's man
page). An engine that cannot route the fabric hands it to the next one or to minhop, so an asked-for engine
other than the active one is a fallback, which changes which links carry traffic.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from fabric.parsers.common import printable
from fabric.ufm.errors import UfmProtocolError
from provision.state.peer_json import JsonTooDeep, loads

MAX_SMCONF = 1 << 20  # opensm.conf has a few hundred keys
_ENGINE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")  # opensm names them so: ftree, updn, torus-2QoS


@dataclass(frozen=True)
class SmConfig:
    requested: tuple[str, ...]  # `routing_engine`, in the order OpenSM tries them; () when not said
    active: str | None  # `routing_engine_active`; None when not said


def _engines(value: Any, what: str) -> tuple[str, ...]:
    if value is None or value == "" or value == "(null)":
        return ()
    if not isinstance(value, str):
        raise UfmProtocolError(f"{what}: a string was expected, not {type(value).__name__}")
    names = tuple(part.strip() for part in value.split(",") if part.strip())
    bad = [n for n in names if not _ENGINE.match(n)]
    if bad:
        raise UfmProtocolError(f"{what}: {printable(bad[0], 40)!r} is not a routing engine's name")
    return names


def parse_sm_config(text: str, what: str = "GET /ufmRest/app/smconf") -> SmConfig:
    """The routing engines of UFM's SM configuration; UfmProtocolError when the answer is not that object."""
    try:
        data = loads(text, what=what)
    except JsonTooDeep as exc:
        raise UfmProtocolError(str(exc)) from None
    except json.JSONDecodeError:
        raise UfmProtocolError(f"{what}: not JSON") from None
    if not isinstance(data, dict):
        raise UfmProtocolError(f"{what}: an object of OpenSM settings was expected, not {type(data).__name__}")
    active = _engines(data.get("routing_engine_active"), f"{what}: routing_engine_active")
    if len(active) > 1:
        raise UfmProtocolError(f"{what}: routing_engine_active names {len(active)} engines, one was expected")
    return SmConfig(_engines(data.get("routing_engine"), f"{what}: routing_engine"), active[0] if active else None)
