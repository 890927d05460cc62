"""The simulated fabric as a lab service (picked up by `sim.lab.discover_services`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from fabric.diags import DIAGS_ENV
from sim.lab import LabContext, Service, python_module
from sim.site_paths import ibsim_state
from sim.sshhosts.linkfaults import FILE_NAME as LINK_FAULTS


def _probe(state: Path) -> bool:
    try:
        pid = int(json.loads(state.read_text())["pid"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


def services(ctx: LabContext) -> list[Service]:
    design = ctx.site.fabric_design
    if design is None:
        return []
    run_dir = ctx.run_dir / "ibfabric"
    # announced where the product looks for this site's fabric tools, and exported for shells (`sim env`)
    state = ibsim_state(ctx.site.paths)
    faults = ctx.site.directory / LINK_FAULTS  # links that train narrower, for burn-in rehearsals
    return [Service(
        name="ibfabric",
        argv=python_module("sim.ibfabric", "serve", "--design", str(design), "--run-dir", str(run_dir),
                           "--state-file", str(state), *(["--link-faults", str(faults)] if faults.is_file() else [])),
        probe=lambda: _probe(state),
        start_timeout_s=60.0,
        exports={DIAGS_ENV: str(state)},
    )]
