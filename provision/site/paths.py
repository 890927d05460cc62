"""Every path derived from a site file, in one place.

A site keeps what bring-up learns in a `state/` directory beside its file: the state database
(`<site>.db`), the SSH host keys pinned on first use (`<site>.known_hosts`), the content-keyed caches
of the parsed file (`.site-cache/`), and where the fabric's tools announce how they are reached
(`<site>.ib-diags.json`, `fabric/diags.py`). The exports of a
harvest (MAC tables, DHCP host entries) go beside the state database actually used, so a database
chosen with `--db` or `$BRINGUP_STATE_DB` keeps its exports with it.

This module only computes paths (it reads `$BRINGUP_STATE_DB`, never the disk) and imports nothing
of the site model, so every consumer can use it cheaply.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ENV_STATE_DB = "BRINGUP_STATE_DB"
SITE_FILE_IN_DIRECTORY = "site.yml"
STATE_DIR_NAME = "state"
CACHE_DIR_NAME = ".site-cache"
EXPORT_FILE_SUFFIXES = {"csv": "macs.csv", "yaml": "macs.yaml", "dhcpd": "dhcpd.conf", "dnsmasq": "dnsmasq.conf"}


def resolve_site_path(path: Path | str) -> Path:
    """A site is a YAML file, or a directory holding `site.yml`."""
    path = Path(path)
    if path.is_dir():
        return path / SITE_FILE_IN_DIRECTORY
    return path


def state_dir(site_file: Path | str) -> Path:
    """The `state/` directory beside the (resolved) site file."""
    return resolve_site_path(site_file).resolve().parent / STATE_DIR_NAME


def cache_dir(site_file: Path | str) -> Path:
    """Where the content-keyed caches of a site file live (keyed on its stem, so no site name is needed)."""
    return state_dir(site_file) / CACHE_DIR_NAME


def chosen_state_db(explicit: Path | None, default: Path, environ: Mapping[str, str] | None = None) -> Path:
    """The state database to use: `explicit` (a `--db` option) > `$BRINGUP_STATE_DB` > `default`."""
    if explicit is not None:
        return explicit
    env = os.environ if environ is None else environ
    value = env.get(ENV_STATE_DB)
    return Path(value) if value else default


def export_files(exports_dir: Path, site_name: str) -> dict[str, Path]:
    """The default file of each harvest export (csv, yaml, dhcpd, dnsmasq) in `exports_dir`."""
    return {kind: exports_dir / f"{site_name}-{suffix}" for kind, suffix in EXPORT_FILE_SUFFIXES.items()}


@dataclass(frozen=True)
class SitePaths:
    """The paths of one site: `site_file` is the site's YAML file, `name` the site's declared name."""

    site_file: Path
    name: str

    @classmethod
    def of(cls, site_file: Path | str, name: str) -> SitePaths:
        return cls(resolve_site_path(site_file).resolve(), name)

    @property
    def state_dir(self) -> Path:
        return self.site_file.parent / STATE_DIR_NAME

    @property
    def default_state_db(self) -> Path:
        """`state/<site>.db` beside the site file."""
        return self.state_dir / f"{self.name}.db"

    def state_db(self, explicit: Path | None = None, environ: Mapping[str, str] | None = None) -> Path:
        """The state database to use: `explicit` > `$BRINGUP_STATE_DB` > `state/<site>.db`."""
        return chosen_state_db(explicit, self.default_state_db, environ)

    @property
    def cache_dir(self) -> Path:
        return self.state_dir / CACHE_DIR_NAME

    @property
    def known_hosts(self) -> Path:
        """The SSH host keys pinned on first use, when the site names no known_hosts file of its own."""
        return self.state_dir / f"{self.name}.known_hosts"

    @property
    def ib_diags(self) -> Path:
        """Where whatever provides this site's infiniband-diags tools announces how they reach the fabric
        (prefix, environment, attachment points: `fabric/diags.py`), when `$BRINGUP_IB_DIAGS` is not set."""
        return self.state_dir / f"{self.name}.ib-diags.json"

    def exports_dir(self, state_db: Path | None = None) -> Path:
        """Where harvest exports go by default: beside `state_db` (default: the database this site uses)."""
        return (state_db if state_db is not None else self.state_db()).parent

    def exports(self, state_db: Path | None = None) -> dict[str, Path]:
        """The default harvest export files (csv, yaml, dhcpd, dnsmasq) in `exports_dir(state_db)`."""
        return export_files(self.exports_dir(state_db), self.name)
