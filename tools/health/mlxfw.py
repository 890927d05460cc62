"""HCA firmware as `mlxfwmanager --query` reports it (PSID, part number, current and available versions, status),
judged against the site's pinned HCA firmware.

Format (REFERENCE-wave3 D, mstflint `mlxfwupdate/mlxfwmanager.cpp`; real captures in tests/fixtures/tools/
mlxfwmanager/): `Querying Mellanox devices firmware ...`, then per device `Device #N:`, a dashed line, `Key: value`
lines (Device Type, Part Number, Description, PSID, PCI Device Name, Base GUID/MAC...), `Versions: Current
Available` followed by rows `FW <current> <available>` (PXE, UEFI...; `N/A` when unknown), and `Status: <text>`.
The tool ships with MFT, not with the driver: the check runs where the site asks for it (`ib.firmware_query`, set
where the hca_firmware role installs MFT); elsewhere ib_firmware reads the running firmware from sysfs. A host
without mlxfwmanager is read with `flint`/`mstflint -d <pci> query` instead (flint.py), one HCA at a time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import flint
from .check import FAST, Check, Results, could_not_run, single
from .config import Expectations
from .errors import ParseError
from .outcome import OK, WARN, Outcome
from .probe_run import classify_shell_rc
from .probes import TOOL_MISSING

PROBE = "mlxfwmanager-query"
_DEVICE = re.compile(r"^\s*Device #(\d+):\s*$")
_FIELD = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 ]*?):\s*(.*?)\s*$")
_VERSION_ROW = re.compile(r"^\s+([A-Za-z][A-Za-z0-9_]*)\s+(\S+)\s+(\S+)\s*$")


@dataclass(frozen=True)
class FwDevice:
    number: int
    fields: dict[str, str] = field(default_factory=dict)  # Device Type, PSID, PCI Device Name, ...
    versions: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)  # FW -> (current, available)
    status: str | None = None

    @property
    def name(self) -> str:
        return self.fields.get("PCI Device Name") or f"device #{self.number}"

    @property
    def firmware(self) -> str | None:
        return self.versions.get("FW", (None, None))[0]


def _na(value: str) -> str | None:
    return None if value.upper() == "N/A" else value


def parse_query(text: str) -> tuple[FwDevice, ...]:
    """Every device of a `mlxfwmanager --query` text output, in its order."""
    found: list[tuple[int, dict[str, str], dict[str, tuple[str | None, str | None]]]] = []
    in_versions = False
    for line in text.splitlines():
        device = _DEVICE.match(line)
        if device:
            found.append((int(device.group(1)), {}, {}))
            in_versions = False
            continue
        if not found or not line.strip() or set(line.strip()) == {"-"}:
            in_versions = in_versions and bool(line.strip())
            continue
        _, fields, versions = found[-1]
        row = _VERSION_ROW.match(line) if in_versions else None
        if row:
            versions[row.group(1)] = (_na(row.group(2)), _na(row.group(3)))
            continue
        kv = _FIELD.match(line)
        if kv is not None:
            in_versions = kv.group(1) == "Versions"
            if not in_versions:
                fields[kv.group(1)] = kv.group(2)
    return tuple(FwDevice(n, {k: v for k, v in f.items() if k != "Status"}, v, f.get("Status"))
                 for n, f, v in found)


def judge(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "hca_firmware_query"
    devices = parse_query(output)
    if not devices:
        raise ParseError(f"mlxfwmanager (exit {rc}) listed no device")
    if rc != 0:
        raise ParseError(f"mlxfwmanager exited {rc}")
    unread = [d.name for d in devices if d.firmware is None]
    if unread:
        raise ParseError(f"no current FW version for {', '.join(unread)}")
    odd = [d for d in devices if d.firmware not in exp.ib.firmware]
    psids = sorted({d.fields.get("PSID", "?") for d in devices})
    if odd:
        return Outcome(name, WARN, f"{len(odd)} of {len(devices)} HCA(s) not on the site's firmware",
                       reason="ib_firmware_mismatch",
                       evidence=tuple(f"{d.name} ({d.fields.get('PSID', '?')}): FW {d.firmware}, site allows "
                                      f"{', '.join(exp.ib.firmware)}" for d in odd),
                       remediation="Run the hca_firmware role (mlxfwmanager -u with the site's image), then reset "
                       "the HCAs (mlxfwreset) or reboot.")
    return Outcome(name, OK, f"{len(devices)} HCA(s) on FW {', '.join(sorted({str(d.firmware) for d in devices}))} "
                   f"(PSID {', '.join(psids)})")


def _not_asked(exp: Expectations) -> str | None:
    if exp.ib.hca_count <= 0:
        return "site declares no InfiniBand HCA on this host"
    if not exp.ib.firmware_query:
        return "site does not ask for mlxfwmanager (ib_firmware reads the firmware from sysfs)"
    return None if exp.ib.firmware else "site pins no HCA firmware"


_BY_MLXFWMANAGER = single("hca_firmware_query", PROBE, judge)
_BY_FLINT = single("hca_firmware_query", flint.PROBE, flint.judge)


def evaluate(results: Results, exp: Expectations) -> Outcome:
    """mlxfwmanager's query where the host has it, else flint's per HCA."""
    mlx = results[PROBE]
    fallback = results.get(flint.PROBE)
    if mlx.ran or mlx.failure_kind != TOOL_MISSING or fallback is None:
        return _BY_MLXFWMANAGER(results, exp)
    fallback = classify_shell_rc(fallback) if fallback.ran else fallback
    if not fallback.ran:
        return could_not_run("hca_firmware_query", fallback)
    return _BY_FLINT({flint.PROBE: fallback}, exp)


CHECKS = (Check("hca_firmware_query", FAST, (PROBE, flint.PROBE), evaluate, _not_asked),)
