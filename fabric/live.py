"""Live discovery: run `ibnetdiscover` here (real HCAs) or against a simulated fabric (ibsim).

A fabric split into parts is only seen whole from several attachment points, so discovery runs from
every local HCA with an ACTIVE InfiniBand port (`ibnetdiscover -C <hca> -P <port>`; RoCE devices and HCAs
whose ports are down are left out), or, on an ibsim fabric, from each attachment point its state file lists,
skipping attachment points an earlier capture already reached. Each run has a timeout; a run that fails
is a warning when another one succeeds, an error when none does.

An ibsim fabric is found through its state file: `--sim-state`, else `$BRINGUP_IBSIM_STATE`, else the one
announced beside the site file (`SitePaths.ibsim_state`); whatever runs the fabric writes it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from fabric.errors import DiscoveryError
from fabric.toolrun import run_tool

SIM_STATE_ENV = "BRINGUP_IBSIM_STATE"
SYS_IB = Path("/sys/class/infiniband")


@dataclass(frozen=True)
class Attachment:
    label: str
    guid: str | None
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def sim_attachments(state_path: Path) -> list[Attachment]:
    """Attachment points of a running simulated fabric, from the state file its harness writes."""
    try:
        state = json.loads(state_path.read_text())
        socket = str(state["socket"])
        pid = int(state["pid"])
        points = list(state["attach"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DiscoveryError(f"simulated fabric state {state_path} is unreadable: {e}") from None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise DiscoveryError(f"the simulated fabric of {state_path} (ibsim pid {pid}) is not running") from None
    except PermissionError:
        pass
    wrapper = shutil.which("ibsim-run") or "ibsim-run"
    return [Attachment(label=f"sim:{p['id']}", guid=p.get("guid"), argv=[wrapper, "ibnetdiscover"],
                       env={"IBSIM_SOCKNAME": socket, "SIM_HOST": p["id"]}) for p in points]


def lab_state_for_site(site: Path) -> Path | None:
    """The ibsim state file announced for this site (`SitePaths.ibsim_state`, beside the site file), if any.

    Whatever runs an ibsim fabric for a site (the project's lab, or an operator rehearsing) writes it there;
    `$BRINGUP_IBSIM_STATE` names one explicitly.
    """
    from provision.site.index import load_index

    state = load_index(site).paths.ibsim_state
    return state if state.is_file() else None


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
        raise DiscoveryError(f"no InfiniBand HCA on this host ({root} is empty or absent) and no simulated "
                             f"fabric ({SIM_STATE_ENV} unset): run on a host of the fabric or pass --discovered")
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
            guid = (ca / "node_guid").read_text().strip().replace(":", "")
        except OSError:
            guid = None
        out.append(Attachment(label=ca.name, guid=guid, argv=["ibnetdiscover", "-C", ca.name, "-P", str(usable[0])]))
    if not out:
        raise DiscoveryError(f"no HCA on this host has an ACTIVE InfiniBand port: {'; '.join(left_out)}")
    return out, notes


@dataclass(frozen=True)
class Discovery:
    """What live discovery saw: (label, ibnetdiscover text) per attachment point that reached something new,
    and a warning for each attachment point that was left out or failed."""

    captures: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...] = ()


def discover(timeout_s: float, sim_state: Path | None = None, sys_ib: Path | None = None) -> Discovery:
    """Run ibnetdiscover from each attachment point. One that fails is a warning as long as another one
    succeeds; when none does, a DiscoveryError carrying every failure."""
    state = sim_state or (Path(os.environ[SIM_STATE_ENV]) if os.environ.get(SIM_STATE_ENV) else None)
    warnings: list[str] = []
    if state is not None:
        points = sim_attachments(state)
    else:
        points, warnings = local_attachments(sys_ib)
    captures: list[tuple[str, str]] = []
    failures: list[str] = []
    seen: set[str] = set()
    for point in points:
        if point.guid and point.guid.lower().removeprefix("0x").zfill(16) in seen:
            continue
        try:
            text = run_ibnetdiscover(point, timeout_s)
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


def run_ibnetdiscover(point: Attachment, timeout_s: float) -> str:
    try:
        proc = run_tool(point.argv, point.env, timeout_s)
    except FileNotFoundError:
        raise DiscoveryError(f"{point.argv[0]} not found: install infiniband-diags (and ibsim-utils for the "
                             "simulated fabric)") from None
    except subprocess.TimeoutExpired:
        raise DiscoveryError(f"ibnetdiscover from {point.label} did not finish within {timeout_s:g} s") from None
    err = [ln for ln in proc.stderr.splitlines() if "sim_connect" not in ln]
    if proc.returncode != 0 or not proc.stdout.strip():
        raise DiscoveryError(f"ibnetdiscover from {point.label} failed (rc {proc.returncode}): "
                             f"{(err or ['no output'])[-1]}")
    # stderr after stdout, as `2>&1` would: libibnetdisc reports duplicate GUIDs there
    return proc.stdout + ("\n" + "\n".join(err) + "\n" if err else "")


def _guids_in(text: str) -> set[str]:
    out = set()
    for line in text.splitlines():
        if line.startswith(("switchguid=0x", "caguid=0x")):
            out.add(line.split("=0x", 1)[1].split("(")[0].strip().zfill(16))
    return out
