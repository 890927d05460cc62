"""`provision report`: gather everything the site's state store and run directory hold into one `Report`,
then write it as one static HTML file (render.py) or print it as JSON."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from provision.firmware.gate import declared_baselines
from provision.site.model import Site
from provision.state import StateStore
from report import gather_files
from report.gather_fabric import burnin_section, disabled_links, fabric_map
from report.gather_firmware import firmware_section
from report.gather_hosts import all_events, failed_hosts, funnel, health_matrix
from report.gather_slurm import slurm_section
from report.model import Report

REPORT_DIR = "report"
REPORT_FILE = "report.html"


def default_output(run_dir: Path) -> Path:
    return run_dir / REPORT_DIR / REPORT_FILE


def gather(site_name: str, store: StateStore, run_dir: Path, design: Path | None,
           training_log: Path | None = None, site: Site | None = None) -> Report:
    """Everything the report shows, from library reads of the store and the run directory's files (and the site's
    firmware baseline, where given, beside the versions the hosts run)."""
    records = [r for r in store.hosts() if r.in_site]
    events = all_events(store)
    burnin, judgement = burnin_section(store)
    validation, validation_source = gather_files.validation(run_dir)
    fabric = fabric_map(design, validation, validation_source, disabled_links(store), judgement)
    return Report(site_name, time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime()), str(store.path), str(run_dir),
                  len(records), funnel(records), failed_hosts(records, events), fabric,
                  gather_files.ethernet(run_dir), health_matrix(records, events), burnin,
                  gather_files.training(run_dir, training_log), slurm_section(store, run_dir),
                  firmware_section(store, events, declared_baselines(site) if site is not None else {}))


def as_json(report: Report) -> dict[str, Any]:
    return dataclasses.asdict(report)
