"""Live discovery: run `ibnetdiscover` here (real HCAs) or against the simulated fabric (ibsim).

A fabric split into parts is only seen whole from several attachment points, so discovery runs from
every local HCA (`ibnetdiscover -C <hca>`), or, on the simulator, from each attachment point the sim
lists, skipping attachment points an earlier capture already reached. Each run has a timeout.
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
        raise DiscoveryError(f"the simulated fabric (ibsim pid {pid}) is not running: start it with "
                             "`python -m sim up`") from None
    except PermissionError:
        pass
    wrapper = shutil.which("ibsim-run") or "ibsim-run"
    return [Attachment(label=f"sim:{p['id']}", guid=p.get("guid"), argv=[wrapper, "ibnetdiscover"],
                       env={"IBSIM_SOCKNAME": socket, "SIM_HOST": p["id"]}) for p in points]


def lab_state_for_site(site: Path) -> Path | None:
    """Where `python -m sim up` keeps this site's simulated fabric state, if it is running."""
    from provision.site import resolve_site_path

    state = resolve_site_path(site).resolve().parent / "state" / "lab" / "ibfabric" / "ibfabric.json"
    return state if state.is_file() else None


def local_attachments() -> list[Attachment]:
    if not SYS_IB.is_dir() or not any(SYS_IB.iterdir()):
        raise DiscoveryError(f"no InfiniBand HCA on this host ({SYS_IB} is empty or absent) and no simulated "
                             f"fabric ({SIM_STATE_ENV} unset): run on a host of the fabric or pass --discovered")
    out = []
    for ca in sorted(SYS_IB.iterdir()):
        try:
            guid = (ca / "node_guid").read_text().strip().replace(":", "")
        except OSError:
            guid = None
        out.append(Attachment(label=ca.name, guid=guid, argv=["ibnetdiscover", "-C", ca.name]))
    return out


def discover(timeout_s: float, sim_state: Path | None = None) -> list[tuple[str, str]]:
    """(label, ibnetdiscover text) for each attachment point that reached something new."""
    state = sim_state or (Path(os.environ[SIM_STATE_ENV]) if os.environ.get(SIM_STATE_ENV) else None)
    points = sim_attachments(state) if state is not None else local_attachments()
    captures: list[tuple[str, str]] = []
    seen: set[str] = set()
    for point in points:
        if point.guid and point.guid.lower().removeprefix("0x").zfill(16) in seen:
            continue
        text = run_ibnetdiscover(point, timeout_s)
        captures.append((point.label, text))
        seen.update(_guids_in(text))
    return captures


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
