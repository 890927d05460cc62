"""GPU interconnect topology from ``nvidia-smi topo -m``: every GPU pair on NVLink, and (where the site asks)
every GPU with a NIC behind its own PCIe switch for GPUDirect RDMA."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .check import FAST, Check, single
from .config import Expectations
from .errors import ParseError
from .outcome import CRITICAL, OK, WARN, Outcome

PROBE = "nvidia-smi-topo-m"

# Underline on/off around the header; some captures keep only the residue without the ESC byte.
_ANSI = re.compile(r"\x1b?\[[0-9;]*m")
_NV = re.compile(r"^NV(\d+)$")
_NEAR = ("PIX", "PXB")


@dataclass(frozen=True)
class Topology:
    gpus: tuple[str, ...]
    nics: tuple[str, ...]
    links: dict[tuple[str, str], str]
    nic_names: dict[str, str]


def parse_topology(text: str) -> Topology:
    lines = [_ANSI.sub("", ln).rstrip() for ln in text.splitlines()]
    header_index = next((i for i, ln in enumerate(lines) if re.match(r"^\s*GPU0\t", ln)), None)
    if header_index is None:
        raise ParseError("no topology header row starting with GPU0")
    columns = [c.strip() for c in lines[header_index].split("\t")[1:]]
    # nvidia-smi prints these words in every capture seen; without them this is another tool or locale.
    if "CPU Affinity" not in columns or "Legend:" not in lines:
        raise ParseError("no 'CPU Affinity' column or 'Legend:' line (truncated, or not nvidia-smi's C output)")
    devices = [c for c in columns if re.match(r"^(GPU|NIC)\d+$", c)]
    links: dict[tuple[str, str], str] = {}
    rows_seen = []
    for line in lines[header_index + 1:]:
        if not line.strip() or line.startswith("Legend"):
            break
        cells = line.split("\t")
        name = cells[0].strip()
        if not re.match(r"^(GPU|NIC)\d+$", name):
            raise ParseError(f"unexpected topology row {line[:60]!r}")
        if len(cells) < len(devices) + 1:
            raise ParseError(f"row {name} has {len(cells) - 1} cells for {len(devices)} devices (truncated?)")
        rows_seen.append(name)
        for col, value in zip(devices, cells[1:], strict=False):
            links[(name, col)] = value.strip()
    if rows_seen != devices:
        raise ParseError(f"rows {rows_seen} do not match columns {devices} (truncated?)")
    nic_names = dict(re.findall(r"^\s*(NIC\d+): (\S+)\s*$", text, flags=re.MULTILINE))
    return Topology(tuple(d for d in devices if d.startswith("GPU")), tuple(d for d in devices if d.startswith("NIC")),
                    links, nic_names)


def parse_topo_check(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "gpu_topology"
    if rc != 0:
        raise ParseError(f"nvidia-smi topo -m exited {rc}")
    topo = parse_topology(output)
    if len(topo.gpus) != exp.gpu.count:
        raise ParseError(f"topology covers {len(topo.gpus)} GPUs, site expects {exp.gpu.count}")
    off_nvlink = [f"{a}-{b} via {topo.links[(a, b)]}" for i, a in enumerate(topo.gpus) for b in topo.gpus[i + 1:]
                  if not _NV.match(topo.links[(a, b)])]
    bonds = sorted({topo.links[(a, b)] for a in topo.gpus for b in topo.gpus if a != b and (a, b) in topo.links})
    if off_nvlink:
        return Outcome(name, CRITICAL, f"{len(off_nvlink)} GPU pair(s) not joined by NVLink", reason="nvlink_topology",
                       evidence=tuple(off_nvlink[:12]),
                       remediation="GPU traffic between these GPUs crosses PCIe/CPU: check NVLink state, the "
                       "fabric manager on NVSwitch systems, and the baseboard.")
    if exp.ib.gpu_nic_affinity:
        lonely = [g for g in topo.gpus if not any(topo.links.get((g, n)) in _NEAR for n in topo.nics)]
        if lonely:
            return Outcome(name, WARN, f"{len(lonely)} GPU(s) without a NIC on their PCIe switch",
                           reason="gpu_nic_affinity", evidence=tuple(lonely),
                           remediation="GPUDirect RDMA for these GPUs crosses the CPU's root complex: check the "
                           "NIC's slot against the platform's GPU/NIC pairing.")
    return Outcome(name, OK, f"{len(topo.gpus)} GPUs, every pair on NVLink ({', '.join(bonds)})"
                   + (f"; {len(topo.nics)} NIC(s)" if topo.nics else ""))


def _no_nvlink(exp: Expectations) -> str | None:
    if exp.gpu.count < 2 or exp.gpu.nvlinks_per_gpu == 0:
        return "site declares no NVLink between GPUs on this host"
    return None


CHECKS = (Check("gpu_topology", FAST, (PROBE,), single("gpu_topology", PROBE, parse_topo_check), _no_nvlink),)
