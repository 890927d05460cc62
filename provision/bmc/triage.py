"""Failure triage: every way a host can fail a BMC step becomes one reason code plus evidence.

Reason codes (the `failed` state's machine-readable reason; what to do about each is in the step table,
provision/steps/pipeline.py):
    bmc_unreachable, bmc_tls, bmc_auth, bmc_timeout, bmc_error_5xx      talking to the BMC
    bmc_not_found, bmc_unsupported, bmc_rejected, bmc_bad_response      the BMC's answers
    no_pxe_nic, pxe_nic_link_down, unexpected_hardware, power_fault     what the BMC reported
    pxe_not_armed                                                       the override did not stick
"""

from __future__ import annotations

from provision.redfish import RedfishError
from provision.steps.runner import HostFailure


class HostProblem(HostFailure):
    """Something the BMC reported that stops this host (no PXE NIC, a missing GPU, no power)."""


def triage(exc: BaseException, *, timeout_s: float | None = None) -> HostFailure:
    if isinstance(exc, HostFailure):
        return exc
    if isinstance(exc, RedfishError):
        return HostFailure(exc.reason, str(exc), exc.evidence())
    if isinstance(exc, TimeoutError):
        limit = f" within {timeout_s:g} s" if timeout_s else ""
        return HostFailure("bmc_timeout", f"the host's BMC work did not finish{limit}", {"error": "host deadline"})
    return HostFailure("bmc_error", f"{type(exc).__name__}: {exc}", {"error": type(exc).__name__})
