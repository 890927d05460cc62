"""In-process readers of /sys and /proc (under a root, so tests can point them at a fake tree).

Each returns (text, rc). Every text starts with a header line that counts what follows, so a parser can
tell a truncated capture from a host that has nothing to report.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import re
from pathlib import Path

from .probes import Collector

_GPU_VENDOR = "0x10de"
_MELLANOX_VENDOR = "0x15b3"
_LINK_FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def pcie_links(root: Path) -> tuple[str, int]:
    """Link speed and width of every NVIDIA GPU and Mellanox/NVIDIA network function."""
    base = root / "sys/bus/pci/devices"
    rows = []
    for dev in sorted(base.iterdir()) if base.is_dir() else []:
        vendor = _read(dev / "vendor")
        klass = _read(dev / "class") or ""
        if (dev / "physfn").exists():
            continue  # SR-IOV virtual functions share the physical function's link
        if vendor == _GPU_VENDOR and klass.startswith("0x03"):
            kind = "gpu"
        elif vendor == _MELLANOX_VENDOR and klass[:6] in ("0x0207", "0x0200"):
            kind = "hca"
        else:
            continue
        row: dict[str, str | list[dict[str, str | None]] | None] = {
            "bdf": dev.name, "kind": kind, "vendor": vendor, "class": klass}
        driver = dev / "driver"
        row["driver"] = os.path.basename(os.readlink(driver)) if driver.is_symlink() else None
        for name in _LINK_FILES:
            row[name] = _read(dev / name)
        upstream = _upstream_ports(dev)
        if upstream:
            row["upstream"] = upstream
        rows.append(json.dumps(row, sort_keys=True))
    return "\n".join([f"# pcie-links v1 devices={len(rows)}", *rows]) + "\n", 0


def _upstream_ports(dev: Path) -> list[dict[str, str | None]]:
    """The PCIe ports between a device and its root complex, nearest first: the device's own sysfs
    directory sits under each of them (/sys/devices/pci0000:00/<root port>/<switch ports>.../<device>)."""
    ports: list[dict[str, str | None]] = []
    for parent in Path(os.path.realpath(dev)).parents:
        if not _BDF.match(parent.name):
            break
        ports.append({"bdf": parent.name, **{name: _read(parent / name) for name in _LINK_FILES}})
    return ports


def ib_sysfs(root: Path) -> tuple[str, int]:
    """Every port of every RDMA device under /sys/class/infiniband: state, rate, counters, firmware."""
    base = root / "sys/class/infiniband"
    if not base.is_dir():
        return "# ib-sysfs v1 hcas=0 ports=0 class=absent\n", 0
    rows = []
    hcas = sorted(base.iterdir())
    for hca in hcas:
        device = hca / "device"
        bdf = os.path.basename(os.path.realpath(device)) if device.exists() else None
        common = {
            "hca": hca.name,
            "fw_ver": _read(hca / "fw_ver"),
            "board_id": _read(hca / "board_id"),
            "hca_type": _read(hca / "hca_type"),
            "bdf": bdf,
        }
        ports_dir = hca / "ports"
        for port in sorted(ports_dir.iterdir(), key=lambda p: p.name) if ports_dir.is_dir() else []:
            counters: dict[str, int | str] = {}
            counters_dir = port / "counters"
            for counter in sorted(counters_dir.iterdir()) if counters_dir.is_dir() else []:
                value = _read(counter)
                if value is not None:
                    counters[counter.name] = int(value) if value.isdigit() else value
            row = {
                **common,
                "port": port.name,
                "state": _read(port / "state"),
                "phys_state": _read(port / "phys_state"),
                "rate": _read(port / "rate"),
                "link_layer": _read(port / "link_layer"),
                "counters": counters,
            }
            rows.append(json.dumps(row, sort_keys=True))
    header = f"# ib-sysfs v1 hcas={len(hcas)} ports={len(rows)} class=present"
    return "\n".join([header, *rows]) + "\n", 0


def proc_file(relative: str, kind: str) -> Collector:
    """A /proc file verbatim, under a header that counts its lines."""

    def collect(root: Path) -> tuple[str, int]:
        text = (root / relative).read_text(encoding="utf-8", errors="replace")
        lines = text.splitlines()
        return "\n".join([f"# {kind} v1 lines={len(lines)}", *lines]) + "\n", 0

    return collect


def cpu_governors(root: Path) -> tuple[str, int]:
    base = root / "sys/devices/system/cpu"
    rows = []
    cpus = sorted((p for p in base.glob("cpu[0-9]*") if p.name[3:].isdigit()), key=lambda p: int(p.name[3:]))
    for cpu in cpus:
        governor = _read(cpu / "cpufreq/scaling_governor")
        if governor is not None:
            rows.append(f"{cpu.name} {governor}")
    header = f"# cpu-governor v1 cpus={len(cpus)} with_cpufreq={len(rows)}"
    return "\n".join([header, *rows]) + "\n", 0


# struct timex (linux/timex.h) on LP64: modes (int + pad), offset, freq, maxerror, esterror (longs),
# status (int + pad), ... 208 bytes in all; room is left for the trailing padding.
class _Timex(ctypes.Structure):
    _fields_ = [
        ("modes", ctypes.c_uint),
        ("offset", ctypes.c_long),
        ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long),
        ("esterror", ctypes.c_long),
        ("status", ctypes.c_int),
        ("rest", ctypes.c_char * 256),
    ]


def adjtimex(_root: Path) -> tuple[str, int]:
    """The kernel's clock discipline state, as timedatectl's NTPSynchronized reads it (no tool needed)."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        raise OSError("libc not found")
    libc = ctypes.CDLL(libc_name, use_errno=True)
    tx = _Timex()
    state = libc.adjtimex(ctypes.byref(tx))
    if state < 0:
        raise OSError(ctypes.get_errno(), "adjtimex failed")
    line = f"adjtimex state={state} status=0x{tx.status:04x} maxerror_us={tx.maxerror} esterror_us={tx.esterror}"
    return line + "\n", 0
