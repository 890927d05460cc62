"""`provision ethernet check`: read every switch (bounded concurrency, per-switch deadline), locate every
designed NIC, compare, and return one report with a stable JSON shape.

JSON (schema `bringup.ethernet-check/1`):
    {"schema", "ok": bool, "seconds": float,
     "counts": {status: n},
     "switches": [{"name", "platform", "address", "location", "state": "ok"|"unknown", "reason",
                   "seconds", "macs": n, "ports": n, "lldp": n, "lldp_reason"}],
     "nics": [{"host", "role": "bmc"|"pxe", "mac", "designed": {"switch", "port"},
               "seen": [{"switch", "port", "vlan"}], "status", "reason", "fix", "swap_with",
               "lldp_designed": [{"name", "port_id", "chassis"}], "lldp_seen": [{"switch", "port", "port_id"}]}],
     "findings": [the nics whose status is not ok]}
Added within /1 (readers of the earlier fields are unaffected): a switch's `lldp` (how many LLDP neighbours
it reported) and `lldp_reason` (why none were read although the switch was: LLDP disabled, another format);
a NIC's `lldp_designed` (the neighbours LLDP hears on its designed port: system name, port id, chassis id
as a MAC or '') and `lldp_seen` (every switch port where LLDP hears this NIC: its MAC as chassis id, or
for the PXE NIC its host's name).
A switch that could not be read is `unknown` with its reason; so is every NIC designed on it and seen
nowhere else. No credential appears anywhere in it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from provision.ethernet.compare import NicResult, compare
from provision.ethernet.design import EthernetDesign, SwitchSpec
from provision.ethernet.switches import SwitchView, read_switch
from provision.site.credentials import Login
from provision.state.secret_values import mask, mask_tree

SCHEMA = "bringup.ethernet-check/1"
DEFAULT_CONCURRENCY = 16
DEFAULT_TIMEOUT_S = 10.0


@dataclass
class EthernetReport:
    switches: dict[str, SwitchView]
    nics: list[NicResult]
    seconds: float

    @property
    def findings(self) -> list[NicResult]:
        return [r for r in self.nics if r.status != "ok"]

    def to_json(self) -> dict[str, object]:
        """The report as ethernet-check.json holds it: every credential the site names masked in each text
        (switches echo what they were sent: an LLDP system name quoting the login password)."""
        masked: dict[str, object] = mask_tree({
            "schema": SCHEMA, "ok": not self.findings, "seconds": round(self.seconds, 3),
            "counts": dict(sorted(Counter(r.status for r in self.nics).items())),
            "switches": [{"name": v.name, "platform": v.spec.platform, "address": v.spec.address,
                          "location": v.spec.location, "state": v.state, "reason": mask(v.reason),
                          "seconds": v.seconds, "macs": len(v.macs), "ports": len(v.ports),
                          "lldp": sum(len(n) for n in v.lldp.values()), "lldp_reason": mask(v.lldp_reason)}
                         for v in sorted(self.switches.values(), key=lambda v: v.name)],
            "nics": [r.to_json() for r in self.nics],
            "findings": [r.to_json() for r in self.findings],
        })
        return masked


def read_switches(switches: dict[str, SwitchSpec], logins: Callable[[str], Login], *,
                  concurrency: int = DEFAULT_CONCURRENCY, timeout: float = DEFAULT_TIMEOUT_S) -> dict[str, SwitchView]:
    """Every switch's view; one that has not answered within 3 timeouts (connect, two commands) is unknown."""
    views: dict[str, SwitchView] = {}
    pool = ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(switches) or 1)),
                              thread_name_prefix="ethernet-switch")
    pending: dict[Future[SwitchView], str] = {}
    started: dict[str, float] = {}
    try:
        for name, spec in sorted(switches.items()):
            try:
                login = logins(spec.credential)
            except Exception as e:  # a credential that cannot be resolved: that switch only is unknown
                views[name] = SwitchView(name, spec, reason=mask(f"credential {spec.credential!r}: {e}"))
                continue
            pending[pool.submit(_timed, started, name, spec, login, timeout)] = name
        deadline_each = 3 * timeout + 2
        while pending:
            done, _ = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
            for fut in done:
                views[pending.pop(fut)] = fut.result()
            now = time.monotonic()
            for fut, name in list(pending.items()):
                if name in started and now - started[name] > deadline_each:
                    pending.pop(fut)
                    views[name] = SwitchView(name, switches[name], seconds=round(now - started[name], 3),
                                             reason=f"no answer within {deadline_each:.0f} s (hung mid-output?)")
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return views


def _timed(started: dict[str, float], name: str, spec: SwitchSpec, login: Login, timeout: float) -> SwitchView:
    started[name] = time.monotonic()
    return read_switch(name, spec, login, timeout)


def check(design: EthernetDesign, logins: Callable[[str], Login], macs: dict[tuple[str, str], str] | None = None,
          *, concurrency: int = DEFAULT_CONCURRENCY, timeout: float = DEFAULT_TIMEOUT_S,
          names: dict[tuple[str, str], frozenset[str]] | None = None) -> EthernetReport:
    """`names`: (host, role) -> the names that NIC may be advertised under in LLDP (names.site_names)."""
    start = time.monotonic()
    views = read_switches(design.switches, logins, concurrency=concurrency, timeout=timeout)
    results = compare(design, views, macs or {}, names)
    return EthernetReport(views, results, time.monotonic() - start)
