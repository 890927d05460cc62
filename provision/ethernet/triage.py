"""The switch's view of one host's PXE NIC, for a step's link or boot failure (harvest-macs, pxe-boot, maas
deploy):
the evidence names the designed switch port and what the switch says about it, and the
reason becomes precise when the switch data shows it:

    pxe_cable_unplugged   the MAC is on no switch and the designed port has no link
    pxe_cable_misplaced   the MAC is learnt on another port than the design's
    pxe_port_err_disabled the designed port is error-disabled at the switch

The switches are read once per run (on the first failure that asks), never when nothing fails; a site
without an Ethernet design (ethernet.yml beside the site file) keeps the step's own reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from provision.ethernet.check import read_switches
from provision.ethernet.compare import NicResult, compare
from provision.ethernet.design import EthernetDesign, load_design
from provision.ethernet.names import site_names
from provision.ethernet.rule import site_positions
from provision.ethernet.switches import SwitchView
from provision.site import Site
from provision.site.credentials import login
from provision.state.facts import HostFacts
from provision.state.secret_values import mask
from provision.steps.runner import HostFailure

# harvest-macs' link failure and the boot failures of maas deploy that a cable can explain
LINK_REASONS = ("pxe_nic_link_down", "maas_commissioning_failed", "maas_deploy_failed", "maas_timeout")
# pxe-boot's boot failure: the BMC did not keep the override, which no cable explains, so the reason stays the
# BMC's; the switch's view rides along as evidence (a PXE cable found out or misplaced now is the next failure)
EVIDENCE_REASONS = ("pxe_not_armed",)
TRIAGE_TIMEOUT_S = 5.0


class SwitchTriage:
    """One per step run: the Ethernet design and, once read, every switch's view."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self._design: EthernetDesign | None = None
        self._views: dict[str, SwitchView] | None = None
        self._lock = asyncio.Lock()

    async def _read(self) -> tuple[EthernetDesign, dict[str, SwitchView]] | None:
        path = self.site.directory / "ethernet.yml"
        if not path.is_file():
            return None
        async with self._lock:
            if self._views is None:
                self._design = load_design(path, site_positions(self.site), self.site.spec.switches)
                self._views = await asyncio.to_thread(read_switches, self._design.switches,
                                                      lambda name: login(self.site, name), timeout=TRIAGE_TIMEOUT_S)
        assert self._design is not None
        return self._design, self._views

    async def nic(self, host: str, role: str, mac: str | None) -> NicResult | None:
        read = await self._read()
        if read is None:
            return None
        design, views = read
        if host not in design.nics:
            return None
        macs = {(host, role): mac} if mac else {}
        # the whole design, so that a crossed pair is seen as one ("swap these two cables")
        names = site_names(self.site, design.nics)
        return next((r for r in compare(design, views, macs, names) if (r.host, r.role) == (host, role)), None)

    async def refine_known(self, host: str, facts: Mapping[str, HostFacts], failure: HostFailure) -> HostFailure:
        """`refine` with the PXE MAC the store's facts hold for `host` (none known: the switch's view alone)."""
        known = facts.get(host)
        return await self.refine(host, known.pxe_mac if known is not None else None, failure)

    async def refine(self, host: str, mac: str | None, failure: HostFailure) -> HostFailure:
        """`failure` with the switch's view of the host's PXE NIC as evidence, its reason made precise."""
        if failure.reason not in LINK_REASONS + EVIDENCE_REASONS:
            return failure
        try:
            r = await self.nic(host, "pxe", mac)
        except Exception as e:  # the switch view is evidence, never a second failure
            return HostFailure(failure.reason, failure.detail, {**failure.evidence,
                               "switch_view": {"error": mask(f"{type(e).__name__}: {e}")}}, failure.remediation)
        if r is None:
            return failure
        view = {"switch": r.designed["switch"], "port": r.designed["port"], "status": r.status,
                "reason": r.reason, "fix": r.fix, "seen": r.seen}
        where = f"{host} PXE NIC {r.mac}: switch {r.designed['switch']}"
        reason, detail = failure.reason, f"{failure.detail}; {where}: {r.reason}"
        if failure.reason in EVIDENCE_REASONS:
            pass
        elif r.status == "not_seen" and r.reason.startswith("unplugged"):
            reason = "pxe_cable_unplugged"
        elif r.status == "wrong_port":
            reason = "pxe_cable_misplaced"
        elif r.status == "err_disabled":
            reason = "pxe_port_err_disabled"
        return HostFailure(reason, detail, {**failure.evidence, "switch_view": view},
                           r.fix if reason != failure.reason else failure.remediation)
