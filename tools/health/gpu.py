"""Checks read from ``nvidia-smi -q``: GPU count and model, ECC, row remapping, clock events, versions,
persistence mode, NVSwitch fabric state."""

from __future__ import annotations

from .check import FAST, Check, single
from .config import Expectations
from .errors import ParseError
from .nvsmi import SmiReport, parse_smi_text, same_model
from .outcome import CRITICAL, OK, WARN, Outcome, unknown

PROBE = "nvidia-smi-q"

_DRIVER_DOWN = "couldn't communicate with the NVIDIA driver"
_LOST_MARKERS = ("GPU is lost", "Unable to determine the device handle", "fallen off the bus")


def _report(output: str, rc: int) -> SmiReport:
    if rc != 0:
        first = next((ln.strip() for ln in output.splitlines() if ln.strip()), "no output")
        raise ParseError(f"nvidia-smi exited {rc}: {first}")
    return parse_smi_text(output)


def parse_inventory(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "gpu_inventory"
    lost = [ln.strip() for ln in output.splitlines() if any(m in ln for m in _LOST_MARKERS)]
    if lost:
        return Outcome(name, CRITICAL, "nvidia-smi reports a lost GPU", reason="gpu_lost", evidence=tuple(lost[:5]),
                       remediation="A GPU fell off the bus: drain the host, power-cycle it (not just reboot); "
                       "if it recurs, reseat or RMA the GPU.")
    if rc != 0 and _DRIVER_DOWN in output:
        return Outcome(name, CRITICAL, "nvidia-smi cannot talk to the driver", reason="driver_not_loaded",
                       evidence=(output.strip().splitlines()[0],),
                       remediation="Check that the NVIDIA kernel module is loaded (dmesg | grep NVRM) and matches "
                       "the installed driver; reinstall the driver or reboot.")
    report = _report(output, rc)
    models = sorted({g.product_name or "?" for g in report.gpus})
    evidence = tuple(f"{g.bus_id} {g.product_name} {g.uuid}" for g in report.gpus)
    wrong_model = [g for g in report.gpus if not same_model(exp.gpu.model, g.product_name)]
    if len(report.gpus) < exp.gpu.count:
        return Outcome(name, CRITICAL, f"{len(report.gpus)} of {exp.gpu.count} GPUs visible",
                       reason="missing_gpu", evidence=evidence,
                       remediation="A GPU is missing: compare `lspci -d 10de:` with nvidia-smi, check dmesg for "
                       "probe failures, reseat or RMA the GPU. Never allocate.")
    if len(report.gpus) > exp.gpu.count or wrong_model:
        return Outcome(name, WARN, f"{len(report.gpus)} GPU(s) of model {', '.join(models)}; site expects "
                       f"{exp.gpu.count} x {exp.gpu.model}", reason="unexpected_gpu", evidence=evidence,
                       remediation="The host differs from the site file: fix the inventory or the hardware.")
    named = "" if models == [exp.gpu.model] else f" (the driver names it {', '.join(models)})"
    return Outcome(name, OK, f"{len(report.gpus)} x {exp.gpu.model}{named}", evidence=evidence,
                   metrics=(("gpu_count", float(len(report.gpus))),))


def parse_ecc(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "gpu_ecc"
    report = _report(output, rc)
    bad = [g for g in report.gpus if g.volatile_uncorrected]
    if bad:
        return Outcome(name, CRITICAL, f"uncorrected volatile ECC errors on {len(bad)} GPU(s)",
                       reason="ecc_uncorrected",
                       evidence=tuple(f"{g.bus_id}: {g.volatile_uncorrected} uncorrected" for g in bad),
                       metrics=tuple((f"uncorrected_{g.bus_id}", float(g.volatile_uncorrected or 0)) for g in bad),
                       remediation="Drain the host and reset the GPU (reboot) so rows are remapped; if the errors "
                       "come back, RMA the GPU.")
    # A mode the report does not state is not a mode that is off: that is ecc_mode_unreadable below.
    off = [g for g in report.gpus if g.ecc_current is not None and g.ecc_current.lower() != "enabled"]
    if exp.gpu.ecc_required and off:
        return Outcome(name, CRITICAL, f"ECC not enabled on {len(off)} GPU(s)", reason="ecc_disabled",
                       evidence=tuple(f"{g.bus_id}: current={g.ecc_current} pending={g.ecc_pending}" for g in off),
                       remediation="Enable ECC (`nvidia-smi -e 1`) and reboot the host.")
    no_mode = [g for g in report.gpus if g.ecc_current is None]
    if exp.gpu.ecc_required and no_mode:
        return unknown(name, f"ECC mode not reported for {len(no_mode)} GPU(s)", reason="ecc_mode_unreadable",
                       evidence=[g.bus_id for g in no_mode],
                       remediation="Run `nvidia-smi -q -d ECC` on the host: if it shows an ECC mode for every GPU, "
                       "the agent misreads this driver's output (report it with the --record output).")
    unread = [g for g in report.gpus if g.volatile_uncorrected is None]
    if unread:
        return unknown(name, f"volatile ECC counters not reported for {len(unread)} GPU(s)", reason="ecc_unreadable",
                       evidence=[g.bus_id for g in unread])
    corrected = sum(g.volatile_corrected or 0 for g in report.gpus)
    return Outcome(name, OK, f"ECC enabled, no uncorrected volatile errors ({corrected} corrected)",
                   metrics=(("ecc_corrected_volatile", float(corrected)),))


def parse_remapped_rows(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "gpu_remapped_rows"
    report = _report(output, rc)
    failed = [g for g in report.gpus if g.remap_failure]
    pending = [g for g in report.gpus if g.remap_pending]
    if failed:
        return Outcome(name, CRITICAL, f"row remapping failed on {len(failed)} GPU(s)", reason="row_remap_failure",
                       evidence=tuple(g.bus_id for g in failed),
                       remediation="The GPU ran out of spare rows: RMA it. Never allocate.")
    if pending:
        return Outcome(name, CRITICAL, f"row remap pending on {len(pending)} GPU(s)", reason="row_remap_pending",
                       evidence=tuple(g.bus_id for g in pending),
                       remediation="Reset the GPU (drain and reboot the host) so the pending remap takes effect, "
                       "then re-run the health checks.")
    unread = [g for g in report.gpus if g.remap_pending is None or g.remap_failure is None]
    if unread:
        return unknown(name, f"row remapper state not reported for {len(unread)} GPU(s)",
                       reason="remap_unreadable", evidence=[g.bus_id for g in unread])
    return Outcome(name, OK, "no pending or failed row remaps")


def parse_clock_events(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "gpu_clock_events"
    report = _report(output, rc)
    if not all(g.clock_events_known for g in report.gpus):
        return unknown(name, "clock event reasons not reported", reason="clock_events_unreadable")
    suspicious = set(exp.gpu.suspicious_clock_events)
    hits = [(g.bus_id, r) for g in report.gpus for r in g.clock_events_active if r in suspicious]
    if hits:
        return Outcome(name, WARN, f"clock slowdown active: {', '.join(sorted({r for _, r in hits}))}",
                       reason="clock_slowdown", evidence=tuple(f"{b}: {r}" for b, r in hits),
                       remediation="Check cooling (fans, inlet temperature, heatsink contact) and power delivery "
                       "(PSUs, power brake signal from the BMC); read `nvidia-smi -q -d PERFORMANCE,TEMPERATURE`.")
    return Outcome(name, OK, "no hardware or thermal slowdown active")


def parse_versions(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "gpu_versions"
    report = _report(output, rc)
    found = {
        "driver": report.driver_version,
        "cuda": report.cuda_version,
        "vbios": ",".join(sorted({g.vbios or "?" for g in report.gpus})),
    }
    problems = []
    if exp.gpu.driver_version and report.driver_version != exp.gpu.driver_version:
        problems.append(f"driver {report.driver_version}, site pins {exp.gpu.driver_version}")
    if exp.gpu.cuda_version and report.cuda_version != exp.gpu.cuda_version:
        problems.append(f"CUDA {report.cuda_version}, site pins {exp.gpu.cuda_version}")
    if exp.gpu.vbios_versions:
        odd = [g for g in report.gpus if g.vbios not in exp.gpu.vbios_versions]
        problems.extend(f"{g.bus_id} VBIOS {g.vbios}, site allows {', '.join(exp.gpu.vbios_versions)}" for g in odd)
    summary = f"driver {found['driver']}, CUDA {found['cuda']}, VBIOS {found['vbios']}"
    if problems:
        return Outcome(name, WARN, summary, reason="version_mismatch", evidence=tuple(problems),
                       remediation="Re-run the driver role (ansible) or flash the pinned VBIOS so every host matches "
                       "the site file.")
    if not (exp.gpu.driver_version or exp.gpu.cuda_version or exp.gpu.vbios_versions):
        return Outcome(name, "not_applicable", summary + " (site pins no versions)", reason="not_applicable")
    return Outcome(name, OK, summary)


def parse_fabric_state(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "gpu_fabric_state"
    report = _report(output, rc)
    bad = [g for g in report.gpus if g.fabric_state != "Completed" or g.fabric_status != "Success"]
    if bad:
        return Outcome(name, CRITICAL, f"NVSwitch fabric not ready on {len(bad)} GPU(s)", reason="fabric_not_ready",
                       evidence=tuple(f"{g.bus_id}: state={g.fabric_state} status={g.fabric_status}" for g in bad),
                       remediation="Start nvidia-fabricmanager (it must match the driver version) and check its log "
                       "(/var/log/fabricmanager.log); restart it after a driver upgrade.")
    return Outcome(name, OK, "every GPU registered with the NVSwitch fabric")


def parse_persistence(output: str, rc: int, exp: Expectations) -> Outcome:
    """Every GPU in persistence mode (nvidia-persistenced started with --persistence-mode, roles/nvidia_driver)."""
    name = "gpu_persistence"
    report = _report(output, rc)
    off = [g for g in report.gpus if g.persistence_mode != "Enabled"]
    if not report.gpus:
        return unknown(name, "nvidia-smi -q listed no GPU", "no_gpu_listed")
    if off:
        return Outcome(name, WARN, f"persistence mode off on {len(off)} of {len(report.gpus)} GPU(s)",
                       reason="persistence_off",
                       evidence=tuple(f"{g.bus_id}: Persistence Mode {g.persistence_mode or 'not reported'}"
                                      for g in off),
                       remediation="Run nvidia-persistenced with --persistence-mode (site.yml's nvidia_driver role "
                       "installs the drop-in); without it the driver tears the GPUs down whenever no client holds "
                       "them (slow first CUDA call, lost clock and ECC state).")
    return Outcome(name, OK, f"persistence mode on for all {len(report.gpus)} GPUs")


def _no_nvswitch(exp: Expectations) -> str | None:
    return None if exp.gpu.nvswitch else "site declares no NVSwitch on this host"


def _no_gpus(exp: Expectations) -> str | None:
    return None if exp.gpu.count > 0 else "site declares no GPUs on this host"


CHECKS = (
    Check("gpu_inventory", FAST, (PROBE,), single("gpu_inventory", PROBE, parse_inventory), _no_gpus),
    Check("gpu_ecc", FAST, (PROBE,), single("gpu_ecc", PROBE, parse_ecc), _no_gpus),
    Check("gpu_remapped_rows", FAST, (PROBE,), single("gpu_remapped_rows", PROBE, parse_remapped_rows), _no_gpus),
    Check("gpu_clock_events", FAST, (PROBE,), single("gpu_clock_events", PROBE, parse_clock_events), _no_gpus),
    Check("gpu_versions", FAST, (PROBE,), single("gpu_versions", PROBE, parse_versions), _no_gpus),
    Check("gpu_persistence", FAST, (PROBE,), single("gpu_persistence", PROBE, parse_persistence), _no_gpus),
    Check("gpu_fabric_state", FAST, (PROBE,), single("gpu_fabric_state", PROBE, parse_fabric_state), _no_nvswitch),
)
