"""A test host's GPU, IB and kernel tools replay the captured H200 outputs of its replay set.

What the health agent (`tools/health`, installed by the health_agent role and run live on the host) reads
is laid out on the host as a real H200 host would show it:

- **Commands** (`nvidia-smi -q`, `dmesg -x`, `df ...`, the probes of `tools/health/catalog.py` that run a
  program): a shim per tool in `/usr/local/sbin` (first in root's PATH) answers the agent's exact invocation
  with the capture (`<probe>.out`, exit status from `<probe>.rc`, `timeout` hangs until killed) and hands any
  other invocation to the real program. While the package that provides the program is not installed the shim
  is absent too (exit 127), so a role still sees a host without the NVIDIA driver before it installs it. A
  capture the set lacks is a host without that tool (127), as the agent's replay mode reads it.
- **/sys** (`pcie-links`, `ib-sysfs`, `cpu-governor`): the tree the agent's collectors read, written into
  the host's /sys from the set's dumps (the collectors read it back to the same text:
  tests/sim/test_testhost_replay.py), with the links under /sys/devices/pci0000:00 as the kernel lays them out.
- **/proc/modules, /proc/swaps**: the capture's text, bind-mounted over the host's /proc files where the
  kernel has them (the test hosts share this machine's kernel); recorded for the starter's watchdog as the
  host's own mounts are (`hosts.mount`), and unmounted by the host's `stop`.

Tool faults of the faults file (`tools: {nvidia-smi-q: truncate}`) change the host's copy of the capture.
The set's files are copied to `/var/lib/bringup-sim/replay` on the host.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

from sim.sshhosts.faults import ToolFault
from sim.testhosts.hosts import mount

REPLAY_DIR = "var/lib/bringup-sim/replay"  # on the host, relative to its root
SHIM_DIR = "usr/local/sbin"
# tool -> (what says the tool is installed: the real program's directories, or a package), {args: probe}
# The invocations are the agent's (tools/health/catalog.py; pinned by tests/sim/test_testhost_replay.py).
SHIMS: dict[str, dict[str, str]] = {
    "nvidia-smi": {"-q": "nvidia-smi-q", "nvlink -s": "nvidia-smi-nvlink-s", "nvlink -e": "nvidia-smi-nvlink-e",
                   "topo -m": "nvidia-smi-topo-m"},
    "dmesg": {"-x": "dmesg"},
    "journalctl": {"-k -b --no-pager -q": "journalctl-k"},
    "systemctl": {"is-active nvidia-fabricmanager": "systemctl-fabricmanager"},
    "df": {"-P -B1 -x tmpfs -x devtmpfs -x squashfs -x overlay": "df"},
    "zpool": {"status -p": "zpool-status"},
}
PROC_FILES = {"proc-modules": "proc/modules", "proc-swaps": "proc/swaps"}

_SHIM = """#!/bin/sh
# bringup test host: {tool} replays this host's capture (sim/testhosts/replay.py); other uses run the real one.
real=
for d in /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
  if [ -x "$d/{tool}" ]; then real="$d/{tool}"; break; fi
done
if [ -z "$real" ]; then echo "sh: 1: {tool}: not found" >&2; exit 127; fi
case "$*" in
{cases}
  *) exec "$real" "$@" ;;
esac
r=/{replay}/$probe
if [ ! -f "$r.out" ]; then echo "sh: 1: {tool}: not found" >&2; exit 127; fi
rc=0
if [ -f "$r.rc" ]; then rc=$(cat "$r.rc"); fi
if [ "$rc" = timeout ]; then exec sleep 2147483647; fi
cat "$r.out"
exit "$rc"
"""


def shim(tool: str) -> str:
    cases = "\n".join(f'  "{args}") probe={probe} ;;' for args, probe in SHIMS[tool].items())
    return _SHIM.format(tool=tool, cases=cases, replay=REPLAY_DIR)


def _faulted(text: str, fault: ToolFault) -> tuple[str | None, str | None]:
    """(output, rc) of a capture under a tool fault; None output: the tool is missing."""
    if fault is ToolFault.truncate:
        return text[: len(text) // 2], None
    if fault is ToolFault.empty:
        return "", None
    if fault is ToolFault.garble:
        return "\x1b[31m" + text[::-1].replace(":", "\ufffd") + "\x00", None
    if fault is ToolFault.missing:
        return None, None
    return text, "timeout"


def copy_set(replay_set: Path, target: Path, tool_faults: Mapping[str, ToolFault]) -> None:
    """The set's captures into `target`, each tool fault applied to its probe's files."""
    target.mkdir(parents=True, exist_ok=True)
    for source in sorted(replay_set.iterdir()):
        if source.is_file():
            shutil.copyfile(source, target / source.name)
    for probe, fault in tool_faults.items():
        out = target / f"{probe}.out"
        if not out.exists():
            continue
        text, rc = _faulted(out.read_text(encoding="utf-8", errors="replace"), fault)
        if text is None:
            out.unlink()
            (target / f"{probe}.rc").unlink(missing_ok=True)
            continue
        out.write_text(text, encoding="utf-8")
        if rc is not None:
            (target / f"{probe}.rc").write_text(rc + "\n")


def _rows(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()[1:] if line.strip()]


def _write(path: Path, value: object) -> None:
    if value is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n")


_LINK_FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")


def _pci_device(sys_root: Path, row: dict[str, object]) -> Path:
    """The device's directory under /sys/devices/pci0000:00/<upstream ports, root first>/, its link files, its
    /sys/bus/pci/devices entry and its driver link."""
    upstream = [u for u in row.get("upstream", []) if isinstance(u, dict)]  # type: ignore[attr-defined]
    directory = sys_root / "devices" / "pci0000:00"
    for port in reversed(upstream):
        directory = directory / str(port["bdf"])
        for name in _LINK_FILES:
            _write(directory / name, port.get(name))
    directory = directory / str(row["bdf"])
    for name in ("vendor", "class", *_LINK_FILES):
        _write(directory / name, row.get(name))
    bus = sys_root / "bus" / "pci" / "devices"
    bus.mkdir(parents=True, exist_ok=True)
    link = bus / str(row["bdf"])
    if not link.is_symlink():
        link.symlink_to(Path("../../..") / directory.relative_to(sys_root))
    if row.get("driver"):
        drivers = sys_root / "bus" / "pci" / "drivers" / str(row["driver"])
        drivers.mkdir(parents=True, exist_ok=True)
        depth = len(directory.relative_to(sys_root).parts)
        (directory / "driver").symlink_to(Path(*[".."] * depth) / drivers.relative_to(sys_root))
    return directory


def _ib(sys_root: Path, text: str, devices: dict[str, Path]) -> None:
    if "class=absent" in text.splitlines()[0]:
        return
    base = sys_root / "class" / "infiniband"
    base.mkdir(parents=True, exist_ok=True)
    for row in _rows(text):
        hca = base / str(row["hca"])
        for name in ("fw_ver", "board_id", "hca_type"):
            _write(hca / name, row.get(name))
        bdf = row.get("bdf")
        device = devices.get(str(bdf)) if bdf else None
        if bdf and device is None:
            device = _pci_device(sys_root, {"bdf": bdf})
        if device is not None and not (hca / "device").is_symlink():
            (hca / "device").symlink_to(Path("../../..") / device.relative_to(sys_root))
        port = hca / "ports" / str(row["port"])
        port.mkdir(parents=True, exist_ok=True)
        for name in ("state", "phys_state", "rate", "link_layer"):
            _write(port / name, row.get(name))
        (port / "counters").mkdir(exist_ok=True)
        for name, value in dict(row.get("counters") or {}).items():  # type: ignore[call-overload]
            _write(port / "counters" / name, value)


def _cpus(sys_root: Path, text: str) -> None:
    header = dict(item.split("=", 1) for item in text.splitlines()[0].split() if "=" in item)
    governors = dict(line.split(" ", 1) for line in text.splitlines()[1:] if line.strip())
    for n in range(int(header.get("cpus", "0"))):
        cpu = sys_root / "devices" / "system" / "cpu" / f"cpu{n}"
        cpu.mkdir(parents=True, exist_ok=True)
        if f"cpu{n}" in governors:
            _write(cpu / "cpufreq" / "scaling_governor", governors[f"cpu{n}"])


def write_sysfs(replay: Path, sys_root: Path) -> None:
    """The /sys tree the agent's collectors read back as the set's `pcie-links`, `ib-sysfs`, `cpu-governor`."""
    devices: dict[str, Path] = {}
    pcie = replay / "pcie-links.out"
    if pcie.exists():
        for row in _rows(pcie.read_text(encoding="utf-8")):
            devices[str(row["bdf"])] = _pci_device(sys_root, row)
    ib = replay / "ib-sysfs.out"
    if ib.exists():
        _ib(sys_root, ib.read_text(encoding="utf-8"), devices)
    governors = replay / "cpu-governor.out"
    if governors.exists():
        _cpus(sys_root, governors.read_text(encoding="utf-8"))


def install(root: Path, replay_set: Path, tool_faults: Mapping[str, ToolFault]) -> None:
    """Before the host's sshd starts: its copy of the set, the shims, /sys, and the /proc files (bound)."""
    replay = root / REPLAY_DIR
    copy_set(replay_set, replay, tool_faults)
    shims = root / SHIM_DIR
    shims.mkdir(parents=True, exist_ok=True)
    for tool in SHIMS:
        (shims / tool).write_text(shim(tool))
        (shims / tool).chmod(0o755)
    write_sysfs(replay, root / "sys")
    for probe, relative in PROC_FILES.items():
        out = replay / f"{probe}.out"
        # A kernel without the file (this machine's, built without loadable modules: no /proc/modules) keeps
        # the host without it: procfs takes no new files, and the agent's check says it could not read it.
        if out.exists() and (root / relative).exists():
            body = replay / f"{probe}.text"
            body.write_text("".join(line + "\n" for line in out.read_text(encoding="utf-8").splitlines()[1:]))
            mount(["mount", "--bind", "-o", "ro", str(body), str(root / relative)])
