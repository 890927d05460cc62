"""PCIe generation and width of every GPU and IB HCA against the site's expectation (sysfs).

Which generation is judged:

* An HCA's link runs at full speed all the time, so its trained link (``current_link_speed``) is judged.
* A GPU lowers its link speed when idle (power saving; often down to gen1) and raises it under load, so its
  trained speed in a snapshot says nothing: an idle healthy GPU can read 2.5 GT/s. Its own ``max_link_speed``
  is only the GPU's capability (a gen5 GPU says gen5 even in a gen4 slot). What the link can reach is the
  lowest capability along the path to the root complex: the GPU and every PCIe port above it (PCIe switch
  ports on an HGX baseboard, the CPU's root port). A GPU behind a gen4 riser switch, baseboard switch or
  root port is therefore flagged here, idle or not. This is the figure nvidia-smi prints as "GPU Link Info /
  PCIe Generation / Max" (the lower of "Device Max" and "Host Max": the A100 capture in shared/realdata
  reads Device Max 4, Host Max 5, Max 4), but read from sysfs: it needs no driver, covers every hop rather
  than the one nvidia-smi calls the host (Host Max reads N/A in the lent H200 VM's capture and in the H200
  and GH200 captures, leaving Max = the GPU's own), and keeps this check on one probe. A GPU link that
  trains below what both of its ends support (a marginal passive riser or cable, a transparent retimer)
  cannot be told from idle power saving in a snapshot: only a reading taken while the GPU works (nvidia-smi's
  "Current") shows it, and this check does not take one.
* Width is judged on the trained link for both kinds: GPUs keep their width when they lower their speed.
"""

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
class UpstreamPort:
    bdf: str
    gen_max: int | None
    gen_current: int | None


@dataclass(frozen=True)
class PcieLink:
    bdf: str
    kind: str  # "gpu" | "hca"
    gen_current: int | None
    gen_max: int | None
    width_current: int | None
    width_max: int | None
    # PCIe ports between the device and the root complex, nearest first (empty: none, or an older dump).
    upstream: tuple[UpstreamPort, ...] = ()

    def path_limit(self) -> UpstreamPort | None:
        """The upstream port with the lowest capability, when it is below the device's own."""
        known = [p for p in self.upstream if p.gen_max is not None]
        if not known:
            return None
        lowest = min(known, key=lambda p: p.gen_max or 0)
        return lowest if self.gen_max is None or (lowest.gen_max or 0) < self.gen_max else None


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
        upstream = row.get("upstream") or []
        if not isinstance(upstream, list) or not all(isinstance(p, dict) and p.get("bdf") for p in upstream):
            raise ParseError(f"pcie-links: upstream of {row['bdf']} is not a list of ports: {upstream!r}")
        links.append(PcieLink(str(row["bdf"]), str(row["kind"]), _gen(row.get("current_link_speed")),
                              _gen(row.get("max_link_speed")), _width(row.get("current_link_width")),
                              _width(row.get("max_link_width")),
                              tuple(UpstreamPort(str(p["bdf"]), _gen(p.get("max_link_speed")),
                                                 _gen(p.get("current_link_speed"))) for p in upstream)))
    return links


def _gen_reachable(link: PcieLink) -> tuple[int | None, str]:
    """The generation judged for a link (see the module docstring) and how to say it in a message."""
    own = link.gen_max if link.kind == "gpu" else link.gen_current
    what = "link can reach" if link.kind == "gpu" else "link trained at"
    limit = link.path_limit()
    if own is not None and limit is not None and limit.gen_max is not None and limit.gen_max < own:
        return limit.gen_max, f"upstream port {limit.bdf} caps the path at gen{limit.gen_max}"
    return own, f"{what} gen{own}"


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
            # GPUs: what the path can reach; HCAs: the trained link (module docstring).
            gen_seen, said = _gen_reachable(link)
            if gen and (gen_seen is None or gen_seen < gen):
                warn.append(f"{kind} {link.bdf}: {said}, expected gen{gen}")
    evidence = tuple(f"{x.kind} {x.bdf} gen{x.gen_current}/{x.gen_max} x{x.width_current}/{x.width_max}"
                     + "".join(f" <- {p.bdf} gen{p.gen_current}/{p.gen_max}" for p in x.upstream)
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
