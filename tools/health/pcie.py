"""PCIe generation and width of every GPU and IB HCA against the site's expectation (sysfs)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .check import FAST, Check, single
from .config import Expectations
from .errors import ParseError
from .outcome import CRITICAL, OK, WARN, Outcome
from .sysfs_dump import parse_dump

PROBE = "pcie-links"

_GEN_BY_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


@dataclass(frozen=True)
class PcieLink:
    bdf: str
    kind: str  # "gpu" | "hca"
    gen_current: int | None
    gen_max: int | None
    width_current: int | None
    width_max: int | None


def _gen(speed: object) -> int | None:
    match = re.match(r"^\s*([\d.]+)\s*GT/s", str(speed or ""))
    return _GEN_BY_GTS.get(float(match.group(1))) if match else None


def _width(value: object) -> int | None:
    text = str(value or "").strip().lstrip("x")
    return int(text) if text.isdigit() else None


def parse_links(text: str) -> list[PcieLink]:
    _fields, rows = parse_dump(text, "pcie-links", "devices")
    links = []
    for row in rows:
        if row.get("kind") not in ("gpu", "hca") or not row.get("bdf"):
            raise ParseError(f"pcie-links: row without kind/bdf: {row}")
        links.append(PcieLink(str(row["bdf"]), str(row["kind"]), _gen(row.get("current_link_speed")),
                              _gen(row.get("max_link_speed")), _width(row.get("current_link_width")),
                              _width(row.get("max_link_width"))))
    return links


def parse_pcie(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "pcie_links"
    if rc != 0:
        raise ParseError(f"pcie-links exited {rc}")
    links = parse_links(output)
    want = {"gpu": (exp.gpu.pcie_gen, exp.gpu.pcie_width, exp.gpu.count),
            "hca": (exp.ib.pcie_gen, exp.ib.pcie_width, exp.ib.hca_count)}
    critical: list[str] = []
    warn: list[str] = []
    narrow: list[int] = []
    for kind, (gen, width, count) in want.items():
        mine = [link for link in links if link.kind == kind]
        if (gen or width) and len(mine) < count:
            critical.append(f"{len(mine)} {kind.upper()} PCIe function(s) found, site expects {count}")
        for link in mine:
            if width and (link.width_current is None or link.width_current < width):
                critical.append(f"{kind} {link.bdf}: x{link.width_current} link, expected x{width}")
                narrow.append(link.width_current or 0)
            # GPUs lower their link speed when idle, so judge them by what the link can train to (max);
            # an HCA's link runs at full speed all the time.
            gen_seen = link.gen_max if kind == "gpu" else link.gen_current
            if gen and (gen_seen is None or gen_seen < gen):
                warn.append(f"{kind} {link.bdf}: gen{gen_seen} link, expected gen{gen}")
    evidence = tuple(f"{x.kind} {x.bdf} gen{x.gen_current}/{x.gen_max} x{x.width_current}/{x.width_max}"
                     for x in links)
    remediation = ("Reseat the card or its riser/cable, check the slot's BIOS link settings; an x4 or gen3 link "
                   "throttles host-device and GPUDirect traffic.")
    if critical:
        reason = f"pcie_width_x{min(narrow)}" if narrow else "pcie_function_missing"
        return Outcome(name, CRITICAL, "; ".join(critical[:3]), reason=reason,
                       evidence=tuple(critical + warn) + evidence, remediation=remediation)
    if warn:
        return Outcome(name, WARN, "; ".join(warn[:3]), reason="pcie_gen_degraded", evidence=tuple(warn) + evidence,
                       remediation=remediation)
    return Outcome(name, OK, f"{len(links)} PCIe link(s) at the expected generation and width", evidence=evidence)


def _nothing_expected(exp: Expectations) -> str | None:
    if exp.gpu.pcie_gen or exp.gpu.pcie_width or exp.ib.pcie_gen or exp.ib.pcie_width:
        return None
    return "site pins no PCIe generation or width"


CHECKS = (Check("pcie_links", FAST, (PROBE,), single("pcie_links", PROBE, parse_pcie), _nothing_expected),)
