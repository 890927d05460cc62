"""HCA firmware as `flint -d <device> query` (MFT) or `mstflint -d <device> query` (Debian's mstflint) reports it:
the agent's reading where mlxfwmanager is not installed.

Format (real outputs in tests/fixtures/tools/flint/, from ironic-python-agent's NVIDIA firmware manager tests): one
`Key:   value` per line, values aligned at column 24; a value that goes on (Rom Info's second ROM) continues on a
line that starts blank; `N/A` where the device has none. After a burn and before a reset the running version differs
from the flash's and is its own line, `FW Version(Running):`. The check reads the versions and the PSID (which board
and vendor the image is built for: an HCA whose PSID differs from its neighbours' takes a different image); the rest
(ROMs, GUIDs, security attributes) is left to flint itself.

The probe queries every HCA the kernel names under /sys/class/infiniband, each section headed by our own line
`### <pci address>`; it prints nothing where mlxfwmanager is installed (mlxfw.py reads that instead).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .config import Expectations
from .errors import ParseError
from .outcome import OK, WARN, Outcome

PROBE = "flint-query"
# Our probe: one section per HCA PCI function, with the tool MFT or the distribution installed.
SCRIPT = (
    "command -v mlxfwmanager >/dev/null 2>&1 && exit 0; "
    "tool=$(command -v flint || command -v mstflint) || { echo 'neither flint nor mstflint is installed'; exit 127; }; "
    "for d in /sys/class/infiniband/*/device; do [ -e \"$d\" ] || continue; "
    "pci=$(basename \"$(readlink -f \"$d\")\"); echo \"### $pci\"; \"$tool\" -d \"$pci\" query 2>&1; done"
)
MAX_LINES = 200  # per device: a query is about 15 lines, `q full` about 30
_LINE = re.compile(r"^([A-Za-z][A-Za-z0-9 ()/_.-]*?):\s*(.*?)\s*$")
_SECTION = re.compile(r"^### (\S{1,64})\s*$")


def _na(value: str | None) -> str | None:
    return None if value is None or not value or value.upper() == "N/A" else value


@dataclass(frozen=True)
class FlintQuery:
    """One device's (or image file's) query."""

    fields: tuple[tuple[str, str], ...]  # every `Key: value`, in order

    def get(self, key: str) -> str | None:
        return _na(next((v for k, v in self.fields if k == key), None))

    @property
    def image_type(self) -> str | None:
        return self.get("Image type")

    @property
    def flash_version(self) -> str | None:
        """The version burnt on the flash (what runs after the next reset)."""
        return self.get("FW Version")

    @property
    def running_version(self) -> str | None:
        """The version the device runs now: the flash's, unless flint names another one running."""
        return self.get("FW Version(Running)") or self.flash_version

    @property
    def reset_pending(self) -> bool:
        return self.get("FW Version(Running)") is not None and self.running_version != self.flash_version

    @property
    def psid(self) -> str | None:
        return self.get("PSID")


def parse_query(text: str) -> FlintQuery:
    """One `flint query` output. Raises ParseError on text that is no query (an error, another tool)."""
    fields: list[tuple[str, str]] = []
    for line in text.splitlines()[:MAX_LINES]:
        if line[:1].isspace():  # a value going on (Rom Info's next ROM): not read
            continue
        found = _LINE.match(line)
        if found is not None:
            fields.append((found.group(1), found.group(2)))
    query = FlintQuery(tuple(fields))
    if query.image_type is None and query.flash_version is None:
        first = next((line.strip() for line in text.splitlines() if line.strip()), "(no output)")
        raise ParseError(f"not a flint query: {first[:200]}")
    return query


@dataclass(frozen=True)
class FlintDevice:
    device: str  # as the probe queried it: the PCI address
    query: FlintQuery | None
    error: str | None = None  # what flint said instead of a query


def parse_sections(text: str) -> tuple[FlintDevice, ...]:
    """The probe's output: each `### <pci>` section parsed, a device flint could not query kept with its error."""
    sections: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        head = _SECTION.match(line)
        if head is not None:
            sections.append((head.group(1), []))
        elif sections:
            sections[-1][1].append(line)
    out = []
    for device, lines in sections:
        try:
            out.append(FlintDevice(device, parse_query("\n".join(lines))))
        except ParseError as exc:
            out.append(FlintDevice(device, None, str(exc)))
    return tuple(out)


def judge(output: str, rc: int, exp: Expectations) -> Outcome:
    """Every HCA's running firmware against the site's pins (the same check as mlxfw.py's, read with flint)."""
    name = "hca_firmware_query"
    devices = parse_sections(output)
    if rc != 0 or not devices:
        first = next((line.strip() for line in output.splitlines() if line.strip()), "no HCA under "
                     "/sys/class/infiniband")
        raise ParseError(f"flint (exit {rc}) listed no device: {first[:200]}")
    unread = [f"{d.device}: {d.error}" for d in devices if d.query is None or d.query.running_version is None]
    if unread:
        raise ParseError(f"no FW version for {'; '.join(unread)}")
    queries = [(d.device, d.query) for d in devices if d.query is not None]
    odd = [(dev, q) for dev, q in queries if q.running_version not in exp.ib.firmware]
    if odd:
        return Outcome(name, WARN, f"{len(odd)} of {len(queries)} HCA(s) not on the site's firmware (flint)",
                       reason="ib_firmware_mismatch",
                       evidence=tuple(f"{dev} ({q.psid or '?'}): FW {q.running_version}"
                                      + (f" running, {q.flash_version} on the flash (reset pending)"
                                         if q.reset_pending else "")
                                      + f", site allows {', '.join(exp.ib.firmware)}" for dev, q in odd),
                       remediation="Run the hca_firmware role (mlxfwmanager -u with the site's image), then reset "
                       "the HCAs (mlxfwreset) or reboot; a `reset pending` HCA needs only the reset.")
    versions = sorted({str(q.running_version) for _, q in queries})
    psids = sorted({q.psid or "?" for _, q in queries})
    return Outcome(name, OK, f"{len(queries)} HCA(s) on FW {', '.join(versions)} (PSID {', '.join(psids)}; flint)")
