"""Which site a `bringup_state` inventory config reads, for the inventory plugin and the `bringup_rollout` lookup.

The lookup answers play keywords (`serial`, `throttle`) that Ansible templates without inventory variables, so it
finds the site the same way the plugin does: from the run's inventory sources (`ansible_inventory_sources`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from provision.site.bounded import load_yaml, read_text

# The repository's embedded simulated site (as provision.command.context.EMBEDDED_SITE; the plugins import
# nothing of the command line).
EMBEDDED_SITE = Path(__file__).resolve().parents[2] / "inventory" / "sim" / "site.yml"
_SUFFIXES = (".bringup_state.yml", ".bringup_state.yaml")
_MAX_CONFIG_BYTES = 64 * 1024


def default_site() -> Path:
    """`$BRINGUP_SITE` (relative to the working directory), else the embedded site."""
    env = os.environ.get("BRINGUP_SITE")
    return Path(env).resolve() if env else EMBEDDED_SITE


def site_file(base: Path, option: object) -> Path:
    """A config's `site` option (relative to the config file's folder), else the default site."""
    return (base / str(option)).resolve() if option else default_site()


def _configs(source: Path) -> list[Path]:
    if source.is_dir():
        return sorted(p for p in source.iterdir() if p.name.endswith(_SUFFIXES))
    return [source] if source.name.endswith(_SUFFIXES) else []


def sites_of_sources(sources: Iterable[str]) -> list[Path]:
    """The distinct sites the run's bringup_state configs read, in order; [] when no source is one."""
    found: list[Path] = []
    for source in sources:
        for config in _configs(Path(source)):
            doc = load_yaml(read_text(config, limit=_MAX_CONFIG_BYTES, what="inventory config"))
            site = site_file(config.resolve().parent, doc.get("site") if isinstance(doc, dict) else None)
            if site not in found:
                found.append(site)
    return found
