"""The simulated lab's own credentials (BMC password, MAAS API key).

They protect nothing real, but they travel the way real ones do: the site file names environment
variables, `sim up` makes the values (or takes them from the environment when already set) and keeps
them in a 0600 file in the lab's run directory; `python -m sim env` prints `export` lines for a shell.
"""

from __future__ import annotations

import json
import os
import secrets as _random
from pathlib import Path

SIM_SECRET_VARIABLES = ("BRINGUP_SIM_BMC_PASSWORD", "BRINGUP_SIM_MAAS_API_KEY", "BRINGUP_SIM_UFM_PASSWORD",
                        "BRINGUP_SIM_SWITCH_PASSWORD")


def _maas_key() -> str:
    # MAAS keys are consumer_key:token_key:token_secret
    return ":".join((_random.token_hex(9), _random.token_hex(9), _random.token_hex(16)))


def load_or_create(run_dir: Path) -> dict[str, str]:
    """The lab's credentials: from the environment when set there, else the ones made earlier, else new.

    Only values this module made are written (0600, `secrets.json`): a value the environment supplies
    is the operator's to keep and is never copied to disk.
    """
    path = run_dir / "secrets.json"
    stored: dict[str, str] = {}
    if path.exists():
        stored = json.loads(path.read_text())
    out = {}
    kept = {}
    for name in SIM_SECRET_VARIABLES:
        value = os.environ.get(name)
        if not value:
            value = stored.get(name) or (_maas_key() if name.endswith("MAAS_API_KEY") else _random.token_urlsafe(12))
            kept[name] = value
        elif name in stored:
            kept[name] = stored[name]
        out[name] = value
    if kept != stored:
        run_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)
        tmp.touch(mode=0o600)
        tmp.write_text(json.dumps(kept))
        tmp.replace(path)
    return out


def export(values: dict[str, str]) -> None:
    """Make the lab's credentials visible to clients started from this process."""
    os.environ.update(values)
