"""Live discovery: run `ibnetdiscover` from every point where this site's tools reach the fabric.

A fabric split into parts is only seen whole from several attachment points, so discovery runs from every
attachment point the site's tools announce (`fabric.diags`) or, by default, from every local HCA with an
ACTIVE InfiniBand port (`ibnetdiscover -C <hca> -P <port>`; RoCE devices and HCAs whose ports are down are
left out), skipping attachment points an earlier capture already reached. Each run has a timeout; a run that
fails is a warning when another one succeeds, an error when none does.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from fabric.diags import DIAGS_ENV, Attachment, Diags, last_complaint
from fabric.errors import DiscoveryError
from fabric.toolrun import ToolOutputTooLarge
from provision.state.identifiers import canonical_guid

SYS_IB = Path("/sys/class/infiniband")


def _port_state(port: Path) -> tuple[str, str]:
    """(link layer, state) of one HCA port as sysfs gives them: ("InfiniBand", "ACTIVE")."""
    try:
        layer = (port / "link_layer").read_text().strip()
    except OSError:
        layer = "?"
    try:
        state = (port / "state").read_text().strip()  # "4: ACTIVE"
    except OSError:
        state = "?"
    return layer, state.split(":", 1)[-1].strip()


def local_attachments(sys_ib: Path | None = None) -> tuple[list[Attachment], list[str]]:
    """The local HCAs with an ACTIVE InfiniBand port (`ibnetdiscover -C <hca> -P <port>` each), and a note for
    every InfiniBand HCA left out because none of its ports is active. Ethernet (RoCE) devices are not part of
    the fabric and are left out without a note; if nothing is left, that is a DiscoveryError naming each device."""
    root = sys_ib or SYS_IB
    cas = sorted(root.iterdir()) if root.is_dir() else []
    if not cas:
        raise DiscoveryError(f"no InfiniBand HCA on this host ({root} is empty or absent) and no other way to the "
                             f"fabric announced ({DIAGS_ENV} unset): run on a host of the fabric or pass --discovered")
    out: list[Attachment] = []
    notes: list[str] = []
    left_out: list[str] = []
    for ca in cas:
        ports = sorted((p for p in (ca / "ports").glob("*") if p.name.isdigit()), key=lambda p: int(p.name))
        states = [(int(p.name), *_port_state(p)) for p in ports]
        usable = [n for n, layer, state in states if layer == "InfiniBand" and state == "ACTIVE"]
        seen = ", ".join(f"port {n} {layer} {state}" for n, layer, state in states) or "no ports"
        if not usable:
            left_out.append(f"{ca.name} ({seen})")
            if any(layer == "InfiniBand" for _n, layer, _s in states):
                notes.append(f"live discovery: {ca.name} not used, no ACTIVE InfiniBand port ({seen})")
            continue
        try:
            guid = canonical_guid((ca / "node_guid").read_text())
        except OSError:
            guid = None
        out.append(Attachment(label=ca.name, guid=guid, args=("-C", ca.name, "-P", str(usable[0]))))
    if not out:
        raise DiscoveryError(f"no HCA on this host has an ACTIVE InfiniBand port: {'; '.join(left_out)}")
    return out, notes


@dataclass(frozen=True)
class Discovery:
    """What live discovery saw: (label, ibnetdiscover text) per attachment point that reached something new,
    and a warning for each attachment point that was left out or failed."""

    captures: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...] = ()


def discover(timeout_s: float, diags: Diags | None = None, sys_ib: Path | None = None) -> Discovery:
    """Run ibnetdiscover from each attachment point (default: the tools `$BRINGUP_IB_DIAGS` announces, else
    this host's). One that fails is a warning as long as another one succeeds; when none does, a
    DiscoveryError carrying every failure."""
    tools = diags if diags is not None else Diags.for_site(None)
    warnings: list[str] = []
    if tools.attachments is not None:
        points = list(tools.attachments)
    else:
        points, warnings = local_attachments(sys_ib)
    captures: list[tuple[str, str]] = []
    failures: list[str] = []
    seen: set[str] = set()
    for point in points:
        if point.guid and canonical_guid(point.guid) in seen:
            continue
        try:
            text = run_ibnetdiscover(tools, point, timeout_s)
        except DiscoveryError as e:
            failures.append(str(e))
            continue
        captures.append((point.label, text))
        seen.update(_guids_in(text))
    if not captures:
        raise DiscoveryError("; ".join(failures) or "no attachment point to run ibnetdiscover from")
    ok = ", ".join(label for label, _text in captures)
    warnings += [f"live discovery: {f} (the fabric was discovered from {ok})" for f in failures]
    return Discovery(tuple(captures), tuple(warnings))


def run_ibnetdiscover(tools: Diags, point: Attachment, timeout_s: float) -> str:
    try:
        proc = tools.run_sync(["ibnetdiscover"], timeout_s, point)
    except FileNotFoundError:
        raise DiscoveryError(f"{tools.argv(['ibnetdiscover'])[0]} not found: install infiniband-diags") from None
    except subprocess.TimeoutExpired:
        raise DiscoveryError(f"ibnetdiscover from {point.label} did not finish within {timeout_s:g} s") from None
    except ToolOutputTooLarge as e:
        raise DiscoveryError(f"ibnetdiscover from {point.label}: {e}") from None
    if proc.returncode != 0 or not proc.stdout.strip():
        raise DiscoveryError(f"ibnetdiscover from {point.label} failed (rc {proc.returncode}): "
                             f"{last_complaint(proc) if proc.stderr.strip() else 'no output'}")
    # stderr after stdout, as `2>&1` would: libibnetdisc reports duplicate GUIDs there
    err = proc.stderr.strip()
    return proc.stdout + ("\n" + err + "\n" if err else "")


def _guids_in(text: str) -> set[str]:
    out = set()
    for line in text.splitlines():
        if line.startswith(("switchguid=0x", "caguid=0x")):
            guid = canonical_guid(line.split("=", 1)[1].split("(")[0])
            if guid is not None:
                out.add(guid)
    return out
