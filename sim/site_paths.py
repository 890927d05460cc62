"""Where the simulated lab keeps a site's files, derived from the site's own paths (`provision/site/paths.py`),
which know nothing of the lab.

The lab's simulated InfiniBand fabric announces itself where a site's fabric tools are announced
(`SitePaths.ib_diags`, `fabric/diags.py`): one file carries both what the product reads (the tools' prefix,
environment and attachment points) and what the lab's other services read (ibsim's socket and console).
"""

from __future__ import annotations

from pathlib import Path

from provision.site.paths import SitePaths

LAB_DIR_NAME = "lab"


def lab_run_dir(paths: SitePaths) -> Path:
    """Where `python -m sim up` runs this site's simulated lab (pid files, keys, logs)."""
    return paths.state_dir / LAB_DIR_NAME


def ibsim_state(paths: SitePaths) -> Path:
    """The simulated fabric's state file, which is the site's fabric-tools announcement."""
    return paths.ib_diags
