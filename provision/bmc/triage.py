"""Failure triage: every way a host can fail a BMC step becomes one reason code plus evidence.

Reason codes (the `failed` state's machine-readable reason):
    bmc_unreachable, bmc_tls, bmc_auth, bmc_timeout, bmc_error_5xx      talking to the BMC
    bmc_not_found, bmc_unsupported, bmc_rejected, bmc_bad_response      the BMC's answers
    no_pxe_nic, pxe_nic_link_down, unexpected_hardware, power_fault     what the BMC reported
    pxe_not_armed                                                       the override did not stick
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provision.errors import BringupError
from provision.redfish import RedfishError

REMEDIATION = {
    "bmc_unreachable": "check the BMC's cabling, address and that it is powered (AC on)",
    "bmc_tls": "check bmc_tls in the site file (ca_bundle, or verify: false for self-signed iDRACs)",
    "bmc_auth": "check the credential the site file names for this BMC (account, password, lockout)",
    "bmc_timeout": "the BMC accepted the connection but did not answer: reset the iDRAC (racreset)",
    "bmc_error_5xx": "the BMC kept answering server errors: retry later or reset the iDRAC",
    "no_pxe_nic": "enable a PXE device in the BIOS (PxeDev1) or fix the host class's pxe_nic",
    "pxe_nic_link_down": "check the PXE NIC's cable and switch port",
    "unexpected_hardware": "reseat or replace the missing part, or fix the host class's expectations",
    "power_fault": "the server did not change power state: check PSUs and the iDRAC's lifecycle log",
    "pxe_not_armed": "the BMC did not keep the boot override: check the iDRAC's job queue",
}


class HostProblem(BringupError):
    """Something the BMC reported that stops this host (no PXE NIC, a missing GPU, no power)."""

    def __init__(self, reason: str, detail: str, evidence: dict[str, Any] | None = None) -> None:
        self.reason = reason
        self.detail = detail
        self.evidence = evidence or {}
        super().__init__(detail)


@dataclass(frozen=True)
class Failure:
    reason: str
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def remediation(self) -> str:
        return REMEDIATION.get(self.reason, "")


def triage(exc: BaseException, *, timeout_s: float | None = None) -> Failure:
    if isinstance(exc, HostProblem):
        return Failure(exc.reason, exc.detail, exc.evidence)
    if isinstance(exc, RedfishError):
        return Failure(exc.reason, str(exc), exc.evidence())
    if isinstance(exc, TimeoutError):
        limit = f" within {timeout_s:g} s" if timeout_s else ""
        return Failure("bmc_timeout", f"the host's BMC work did not finish{limit}", {"error": "host deadline"})
    return Failure("bmc_error", f"{type(exc).__name__}: {exc}", {"error": type(exc).__name__})
