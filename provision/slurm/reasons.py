"""bringup's drain reasons in Slurm, and telling them from everybody else's.

Two writers use a prefix, as LBNL NHC does with `NHC:` (REFERENCE-wave3 A1, mej/nhc `node-mark-online`), so
that bringup only ever resumes a node it drained itself:

- `provision slurm sync`: `bringup: xid_79 (2026-12-05 03:12)`: the host's failure reason (or
  `not golden: <state>` for a host still on its way), and when it left golden, UTC to the minute;
- Slurm's HealthCheckProgram (`tools/slurm_health_check.py`, on the node, standard library only, so it
  writes the same shape itself; a test pins the two):
  `bringup-check: xid_79 (2026-12-05 03:12) <what the check saw>`.

Any other reason (an admin's, or Slurm's own such as "Not responding") is foreign: left alone.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from enum import StrEnum

SYNC_PREFIX = "bringup: "
CHECK_PREFIX = "bringup-check: "
_CODE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_CHECK = re.compile(r"^bringup-check: (?P<code>[a-z][a-z0-9_]{0,63}) \((?P<at>[0-9: -]{16})\)(?: (?P<detail>.*))?$",
                    re.DOTALL)


class Owner(StrEnum):
    none = "none"  # no reason at all
    sync = "sync"  # drained by `provision slurm sync`
    check = "check"  # drained by the health check on the node
    foreign = "foreign"  # an admin, another tool, Slurm itself


@dataclass(frozen=True)
class Reason:
    owner: Owner
    text: str
    code: str | None = None  # the failure reason, for a health-check drain
    detail: str = ""


def minute(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(at))


def sync_reason(code: str | None, state: str, at: float) -> str:
    """The reason the sync sets on a node whose host is not golden: its failure reason, or the state it is in."""
    what = code if code and _CODE.match(code) else f"not golden: {state}"
    return f"{SYNC_PREFIX}{what} ({minute(at)})"


def parse_reason(text: str) -> Reason:
    if not text:
        return Reason(Owner.none, "")
    if text.startswith(SYNC_PREFIX):
        return Reason(Owner.sync, text)
    match = _CHECK.match(text)
    if match:
        return Reason(Owner.check, text, code=match.group("code"), detail=(match.group("detail") or "").strip())
    if text.startswith(CHECK_PREFIX):  # ours, though its shape was cut or garbled: no reason code to record
        return Reason(Owner.check, text, code=None, detail=text[len(CHECK_PREFIX):].strip())
    return Reason(Owner.foreign, text)
