"""Host checks: nvidia-peermem, fabric manager, swap, CPU governor, clock synchronisation, docker with GPUs."""

from __future__ import annotations

import re

from .check import FAST, Check, single
from .config import Expectations
from .errors import ParseError
from .outcome import CRITICAL, OK, WARN, Outcome
from .sysfs_dump import parse_counted_lines

MODULES_PROBE = "proc-modules"
FABRICMANAGER_PROBE = "systemctl-fabricmanager"
SWAPS_PROBE = "proc-swaps"
GOVERNOR_PROBE = "cpu-governor"
CLOCK_PROBE = "adjtimex"
DOCKER_PROBE = "docker-gpus"

# adjtimex(2): STA_UNSYNC in status, TIME_ERROR as the return value; systemd's "NTP synchronized" also
# requires maxerror below 16 s.
_STA_UNSYNC = 0x0040
_TIME_ERROR = 5
_MAXERROR_SYNCED_US = 16_000_000


def parse_peermem(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "nvidia_peermem"
    if rc != 0:
        raise ParseError(f"reading /proc/modules failed ({rc})")
    body = parse_counted_lines(output, MODULES_PROBE)
    if any(len(line.split()) < 6 for line in body):
        raise ParseError("a /proc/modules line has fewer than 6 fields")
    modules = {line.split()[0] for line in body}
    if not modules:
        raise ParseError("/proc/modules lists no modules (a running kernel always has some)")
    if "nvidia_peermem" in modules:
        return Outcome(name, OK, "nvidia_peermem loaded")
    return Outcome(name, WARN, "nvidia_peermem not loaded: GPUDirect RDMA is off", reason="peermem_not_loaded",
                   remediation="`modprobe nvidia-peermem` and make it persistent (/etc/modules-load.d); without it "
                   "NCCL copies IB traffic through host memory.")


def parse_fabricmanager(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "fabric_manager"
    state = output.strip().splitlines()[-1].strip() if output.strip() else ""
    if state == "active" and rc == 0:
        return Outcome(name, OK, "nvidia-fabricmanager active")
    if state in ("inactive", "failed", "activating", "deactivating", "unknown") or rc in (3, 4):
        return Outcome(name, CRITICAL, f"nvidia-fabricmanager is {state or 'not active'}",
                       reason="fabric_manager_down", evidence=(output.strip()[:200],),
                       remediation="`systemctl start nvidia-fabricmanager`; its version must equal the driver's; "
                       "without it NVSwitch systems run no CUDA work across GPUs.")
    raise ParseError(f"systemctl answered {state!r} (exit {rc})")


def parse_swap(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "swap"
    if rc != 0:
        raise ParseError(f"reading /proc/swaps failed ({rc})")
    lines = [ln for ln in parse_counted_lines(output, SWAPS_PROBE) if ln.strip()]
    if not lines or lines[0].split()[:2] != ["Filename", "Type"]:
        raise ParseError("not /proc/swaps content (no 'Filename Type' header)")
    if any(len(ln.split()) < 5 for ln in lines[1:]):
        raise ParseError("a /proc/swaps line has fewer than 5 fields")
    devices = [ln.split()[0] for ln in lines[1:]]
    if devices and not exp.system.swap_allowed:
        return Outcome(name, WARN, f"swap is on: {', '.join(devices)}", reason="swap_on", evidence=tuple(lines[1:]),
                       remediation="`swapoff -a` and remove swap from /etc/fstab: a swapping training host stalls "
                       "the whole job.")
    return Outcome(name, OK, "swap off" if not devices else f"swap on ({len(devices)}), allowed by the site")


def parse_governor(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "cpu_governor"
    lines = [ln for ln in output.splitlines() if ln.strip()]
    header = re.match(r"^# cpu-governor v1 cpus=(\d+) with_cpufreq=(\d+)$", lines[0]) if lines else None
    if rc != 0 or not header:
        raise ParseError("no cpu-governor header")
    cpus, with_freq = int(header.group(1)), int(header.group(2))
    rows = [ln.split() for ln in lines[1:]]
    if len(rows) != with_freq or any(len(r) != 2 for r in rows):
        raise ParseError(f"header announces {with_freq} CPUs with cpufreq, dump holds {len(rows)} rows")
    if cpus == 0:
        raise ParseError("no CPUs listed under /sys/devices/system/cpu")
    if with_freq == 0:
        return Outcome(name, "not_applicable", f"no cpufreq on {cpus} CPUs (virtual machine or no scaling driver)",
                       reason="not_applicable")
    want = exp.system.cpu_governor
    odd = [r for r in rows if r[1] != want]
    if odd:
        seen = sorted({r[1] for r in odd})
        return Outcome(name, WARN, f"{len(odd)} of {with_freq} CPUs not on governor {want} ({', '.join(seen)})",
                       reason="cpu_governor", evidence=tuple(" ".join(r) for r in odd[:8]),
                       remediation=f"Set the '{want}' governor (cpupower frequency-set -g {want}, or the tuned "
                       "profile in the host role): CPU-side stalls slow every rank.")
    return Outcome(name, OK, f"{with_freq} CPUs on governor {want}")


def parse_clock(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "clock_sync"
    match = re.search(r"adjtimex state=(-?\d+) status=0x([0-9a-fA-F]+) maxerror_us=(\d+) esterror_us=(\d+)", output)
    if rc != 0 or not match:
        raise ParseError("no adjtimex state line")
    state, status, maxerror = int(match.group(1)), int(match.group(2), 16), int(match.group(3))
    synced = state != _TIME_ERROR and not status & _STA_UNSYNC and maxerror < _MAXERROR_SYNCED_US
    if synced:
        return Outcome(name, OK, f"kernel clock synchronised (max error {maxerror} us)",
                       metrics=(("clock_maxerror_us", float(maxerror)),))
    return Outcome(name, WARN, "kernel clock not synchronised to NTP/PTP", reason="clock_unsynchronised",
                   evidence=(match.group(0),), metrics=(("clock_maxerror_us", float(maxerror)),),
                   remediation="Enable and check chrony/ntpd (`chronyc tracking`): unsynchronised clocks break "
                   "log correlation across hosts and Kerberos/TLS.")


def parse_docker(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "docker_gpus"
    gpus = re.findall(r"^GPU \d+: .*\(UUID: GPU-[0-9a-f-]+\)", output, flags=re.MULTILINE)
    if rc == 0 and len(gpus) == exp.gpu.count:
        return Outcome(name, OK, f"`docker run --gpus all` sees {len(gpus)} GPU(s)")
    if rc == 0 and not gpus:
        raise ParseError("container ran but printed no `nvidia-smi -L` listing")
    if rc == 0:
        return Outcome(name, CRITICAL, f"container sees {len(gpus)} of {exp.gpu.count} GPUs", reason="docker_gpus",
                       evidence=tuple(output.strip().splitlines()[:6]),
                       remediation="Re-run the container toolkit role (nvidia-ctk runtime configure) and restart "
                       "docker.")
    tail = tuple(output.strip().splitlines()[-4:])
    if re.search(r"Cannot connect to the Docker daemon|Unable to find image|pull access denied", output):
        raise ParseError(f"docker itself failed (exit {rc}): {' | '.join(tail)}")
    return Outcome(name, CRITICAL, f"`docker run --gpus all` failed (exit {rc})", reason="docker_gpus", evidence=tail,
                   remediation="Check nvidia-container-toolkit (`nvidia-ctk runtime configure --runtime=docker`), "
                   "the driver, and `docker info`; containers are how jobs run here.")


def _no_gpus(exp: Expectations) -> str | None:
    return None if exp.gpu.count > 0 else "site declares no GPUs on this host"


CHECKS = (
    Check("nvidia_peermem", FAST, (MODULES_PROBE,), single("nvidia_peermem", MODULES_PROBE, parse_peermem),
          lambda e: None if e.gpu.peermem_required else "site does not require GPUDirect RDMA (nvidia-peermem)"),
    Check("fabric_manager", FAST, (FABRICMANAGER_PROBE,),
          single("fabric_manager", FABRICMANAGER_PROBE, parse_fabricmanager),
          lambda e: None if e.gpu.nvswitch else "site declares no NVSwitch on this host"),
    Check("swap", FAST, (SWAPS_PROBE,), single("swap", SWAPS_PROBE, parse_swap)),
    Check("cpu_governor", FAST, (GOVERNOR_PROBE,), single("cpu_governor", GOVERNOR_PROBE, parse_governor),
          lambda e: None if e.system.cpu_governor else "site pins no CPU governor"),
    Check("clock_sync", FAST, (CLOCK_PROBE,), single("clock_sync", CLOCK_PROBE, parse_clock),
          lambda e: None if e.system.clock_sync_required else "site does not require a synchronised clock"),
    Check("docker_gpus", FAST, (DOCKER_PROBE,), single("docker_gpus", DOCKER_PROBE, parse_docker),
          lambda e: _no_gpus(e) or (None if e.system.docker_image else "site runs no docker on this host")),
)
