"""Parsers of ``nvidia-smi -q`` (text) and ``nvidia-smi -q -x`` (XML) into one frozen report."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from .errors import ParseError


@dataclass(frozen=True)
class GpuInfo:
    bus_id: str
    product_name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    vbios: str | None = None
    ecc_current: str | None = None
    ecc_pending: str | None = None
    volatile_uncorrected: int | None = None
    volatile_corrected: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    clock_events_active: tuple[str, ...] = ()
    clock_events_known: bool = False
    pcie_gen_max: int | None = None
    pcie_gen_current: int | None = None
    pcie_width_max: int | None = None
    pcie_width_current: int | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None
    persistence_mode: str | None = None


@dataclass(frozen=True)
class SmiReport:
    driver_version: str | None
    cuda_version: str | None
    attached: int
    gpus: tuple[GpuInfo, ...] = field(default=())


# ---------------------------------------------------------------- models

_BRAND = "nvidia "


def _model_key(name: str) -> str:
    words = " ".join(name.split()).casefold()
    return words[len(_BRAND):] if words.startswith(_BRAND) else words


def same_model(expected: str, reported: str | None) -> bool:
    """Whether the driver's product name is the site's model. Older drivers print names without the brand
    (`A100-SXM4-40GB`, `Tesla V100-SXM2-16GB`), newer ones with it (`NVIDIA A100-SXM4-40GB`): the `NVIDIA `
    prefix, case and runs of blanks do not count; anything else does (`Tesla` is part of the name)."""
    return reported is not None and _model_key(expected) == _model_key(reported)


# ---------------------------------------------------------------- text

_KV = re.compile(r"^(\S.*?)\s+:\s?(.*)$")


@dataclass
class _Node:
    key: str
    value: str | None
    children: list[_Node] = field(default_factory=list)

    def find(self, *path: str) -> _Node | None:
        """The node at `path`, keys compared without case: driver generations spell some differently (`Ecc Mode`
        in the 410 and 418 drivers, `ECC Mode` in current ones; `Replays since reset` / `Replays Since Reset`)."""
        node: _Node | None = self
        for key in path:
            assert node is not None
            wanted = key.casefold()
            node = next((c for c in node.children if c.key.casefold() == wanted), None)
            if node is None:
                return None
        return node

    def value_at(self, *path: str) -> str | None:
        node = self.find(*path)
        return None if node is None else node.value

    def first_of(self, *keys: str) -> _Node | None:
        for key in keys:
            node = self.find(key)
            if node is not None:
                return node
        return None


def _tree(text: str) -> _Node:
    root = _Node("", None)
    stack: list[tuple[int, _Node]] = [(-1, root)]
    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.lstrip(" \t")
        if not stripped or stripped.startswith("====="):
            continue
        indent = len(line) - len(stripped)
        match = _KV.match(stripped)
        node = _Node(match.group(1).strip(), match.group(2).strip()) if match else _Node(stripped.strip(), None)
        while stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    match = re.match(r"^\s*(\d+)", value)
    return int(match.group(1)) if match else None


def _yes_no(value: str | None) -> bool | None:
    if value is None:
        return None
    low = value.strip().lower()
    if low == "yes":
        return True
    if low == "no":
        return False
    return None


def _sum_counts(values: list[str | None]) -> int | None:
    numbers = [n for n in (_int(v) for v in values) if n is not None]
    return sum(numbers) if numbers else None


def _ecc_totals(volatile: _Node | None) -> tuple[int | None, int | None]:
    """(uncorrected, corrected) volatile ECC counts across driver generations' layouts."""
    if volatile is None:
        return None, None
    unc: list[str | None] = []
    cor: list[str | None] = []
    for child in volatile.children:
        key = child.key.lower()
        if child.children:  # old layout: Single Bit / Double Bit sections with a Total
            total = child.value_at("Total")
            (unc if "double" in key else cor).append(total)
        elif "uncorrectable" in key:
            unc.append(child.value)
        elif "correctable" in key:
            cor.append(child.value)
    return _sum_counts(unc), _sum_counts(cor)


def _active_reasons(node: _Node | None) -> tuple[tuple[str, ...], bool]:
    if node is None:
        return (), False
    active: list[str] = []
    known = False

    def walk(n: _Node) -> None:
        nonlocal known
        for child in n.children:
            if child.value is not None and child.value in ("Active", "Not Active"):
                known = True
                if child.value == "Active":
                    active.append(child.key)
            walk(child)

    walk(node)
    return tuple(active), known


def _gpu_from_text(section: _Node) -> GpuInfo:
    bus_id = section.key.split(None, 1)[1] if " " in section.key else section.key
    vol_unc, vol_cor = _ecc_totals(section.find("ECC Errors", "Volatile"))
    reasons, known = _active_reasons(section.first_of("Clocks Event Reasons", "Clocks Throttle Reasons"))
    link = section.find("PCI", "GPU Link Info")
    return GpuInfo(
        bus_id=bus_id,
        product_name=section.value_at("Product Name"),
        uuid=section.value_at("GPU UUID"),
        serial=section.value_at("Serial Number"),
        vbios=section.value_at("VBIOS Version"),
        ecc_current=section.value_at("ECC Mode", "Current"),
        ecc_pending=section.value_at("ECC Mode", "Pending"),
        volatile_uncorrected=vol_unc,
        volatile_corrected=vol_cor,
        remap_pending=_yes_no(section.value_at("Remapped Rows", "Pending")),
        remap_failure=_yes_no(section.value_at("Remapped Rows", "Remapping Failure Occurred")),
        clock_events_active=reasons,
        clock_events_known=known,
        pcie_gen_max=_int(link.value_at("PCIe Generation", "Max")) if link else None,
        pcie_gen_current=_int(link.value_at("PCIe Generation", "Current")) if link else None,
        pcie_width_max=_int(link.value_at("Link Width", "Max")) if link else None,
        pcie_width_current=_int(link.value_at("Link Width", "Current")) if link else None,
        fabric_state=section.value_at("Fabric", "State"),
        fabric_status=section.value_at("Fabric", "Status"),
        persistence_mode=section.value_at("Persistence Mode"),
    )


def parse_smi_text(text: str) -> SmiReport:
    """Parse ``nvidia-smi -q``. Raises ParseError when the output is not (or not all of) such a report."""
    root = _tree(text)
    attached_raw = root.value_at("Attached GPUs")
    attached = _int(attached_raw)
    if attached is None:
        raise ParseError("no 'Attached GPUs' line: not nvidia-smi -q output")
    sections = [c for c in root.children if c.value is None and re.match(r"^GPU [0-9A-Fa-f]{4,8}:", c.key)]
    gpus = tuple(_gpu_from_text(s) for s in sections)
    if len(gpus) != attached:
        raise ParseError(f"report announces {attached} GPUs but holds {len(gpus)} (truncated output?)")
    for gpu, section in zip(gpus, sections, strict=True):
        if gpu.product_name is None or gpu.uuid is None:
            raise ParseError(f"GPU {gpu.bus_id}: no product name or UUID (truncated output?)")
        # "Processes" closes every GPU's section in every driver generation seen; without it the report was cut.
        if section.find("Processes") is None:
            raise ParseError(f"GPU {gpu.bus_id}: section has no 'Processes' entry (truncated output?)")
    return SmiReport(root.value_at("Driver Version"), root.value_at("CUDA Version"), attached, gpus)


# ---------------------------------------------------------------- XML


def _xtext(elem: ET.Element | None, path: str) -> str | None:
    if elem is None:
        return None
    found = elem.find(path)
    if found is None or found.text is None:
        return None
    return found.text.strip()


# XML tags of the clock event reasons, named as the text report names them.
_XML_REASONS = {
    "gpu_idle": "Idle",
    "applications_clocks_setting": "Applications Clocks Setting",
    "sw_power_cap": "SW Power Cap",
    "hw_slowdown": "HW Slowdown",
    "hw_thermal_slowdown": "HW Thermal Slowdown",
    "hw_power_brake_slowdown": "HW Power Brake Slowdown",
    "sync_boost": "Sync Boost",
    "sw_thermal_slowdown": "SW Thermal Slowdown",
    "display_clock_setting": "Display Clock Setting",
}


def _gpu_from_xml(gpu: ET.Element) -> GpuInfo:
    volatile = gpu.find("ecc_errors/volatile")
    unc: list[str | None] = []
    cor: list[str | None] = []
    if volatile is not None:
        for child in volatile:
            if len(child):  # old layout: single_bit / double_bit with <total>
                (unc if "double" in child.tag else cor).append(_xtext(child, "total"))
            elif "uncorrectable" in child.tag:
                unc.append((child.text or "").strip())
            elif "correctable" in child.tag:
                cor.append((child.text or "").strip())
    reasons_elem = gpu.find("clocks_event_reasons")
    if reasons_elem is None:
        reasons_elem = gpu.find("clocks_throttle_reasons")
    active: list[str] = []
    known = False
    if reasons_elem is not None:
        for child in reasons_elem:
            value = (child.text or "").strip()
            if value in ("Active", "Not Active"):
                known = True
                if value == "Active":
                    tag = re.sub(r"^clocks_(event|throttle)_reason_", "", child.tag)
                    active.append(_XML_REASONS.get(tag, tag))
    return GpuInfo(
        bus_id=gpu.get("id", ""),
        product_name=_xtext(gpu, "product_name"),
        uuid=_xtext(gpu, "uuid"),
        serial=_xtext(gpu, "serial"),
        vbios=_xtext(gpu, "vbios_version"),
        ecc_current=_xtext(gpu, "ecc_mode/current_ecc"),
        ecc_pending=_xtext(gpu, "ecc_mode/pending_ecc"),
        volatile_uncorrected=_sum_counts(unc),
        volatile_corrected=_sum_counts(cor),
        remap_pending=_yes_no(_xtext(gpu, "remapped_rows/remapped_row_pending")),
        remap_failure=_yes_no(_xtext(gpu, "remapped_rows/remapped_row_failure")),
        clock_events_active=tuple(active),
        clock_events_known=known,
        pcie_gen_max=_int(_xtext(gpu, "pci/pci_gpu_link_info/pcie_gen/max_link_gen")),
        pcie_gen_current=_int(_xtext(gpu, "pci/pci_gpu_link_info/pcie_gen/current_link_gen")),
        pcie_width_max=_int(_xtext(gpu, "pci/pci_gpu_link_info/link_widths/max_link_width")),
        pcie_width_current=_int(_xtext(gpu, "pci/pci_gpu_link_info/link_widths/current_link_width")),
        fabric_state=_xtext(gpu, "fabric/state"),
        fabric_status=_xtext(gpu, "fabric/status"),
        persistence_mode=_xtext(gpu, "persistence_mode"),
    )


def parse_smi_xml(text: str, require_all: bool = True) -> SmiReport:
    """Parse ``nvidia-smi -q -x``. Raises ParseError on malformed or truncated XML.

    ``require_all=False`` accepts a report that holds fewer GPUs than it announces (trimmed test captures).
    """
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ParseError(f"not well-formed XML: {exc}") from exc
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"root element is <{root.tag}>, not <nvidia_smi_log>")
    attached = _int(_xtext(root, "attached_gpus"))
    if attached is None:
        raise ParseError("no <attached_gpus>")
    gpus = tuple(_gpu_from_xml(g) for g in root.findall("gpu"))
    if require_all and len(gpus) != attached:
        raise ParseError(f"report announces {attached} GPUs but holds {len(gpus)}")
    return SmiReport(_xtext(root, "driver_version"), _xtext(root, "cuda_version"), attached, gpus)
