"""The lab of a site: its simulators (and the opt-in ones asked for or already running), with the lab's
secrets exported for the clients this process starts."""

from __future__ import annotations

from pathlib import Path

from provision.command.context import default_site_path
from provision.site import load_site
from sim import secrets
from sim.lab import Lab, LabContext, LabError, Service, discover_services, optional_service_names, optional_services
from sim.site_paths import lab_run_dir


def open_context(site_path: Path | None) -> LabContext:
    site = load_site(site_path or default_site_path())
    run_dir = lab_run_dir(site.paths)
    values = secrets.load_or_create(run_dir)
    secrets.export(values)
    return LabContext(site=site, run_dir=run_dir, secrets=values)


def _running_optional(ctx: LabContext) -> dict[str, str | None]:
    """The opt-in simulators that have a pid file in the run directory (started by an earlier `up`)."""
    return {name: None for name in optional_service_names() if (ctx.run_dir / f"{name}.pid").exists()}


def open_lab(site_path: Path | None, with_: dict[str, str | None] | None = None) -> Lab:
    """The lab of the site: its simulators, the opt-in ones asked for, and the opt-in ones running."""
    ctx = open_context(site_path)
    wanted = {**_running_optional(ctx), **(with_ or {})}
    extra: list[Service] = []
    for name, arg in wanted.items():
        try:
            extra += optional_services(ctx, {name: arg})
        except LabError:
            if name in (with_ or {}):
                raise
            # A running one whose prerequisites went away: still stopped through its pid file.
    return Lab(discover_services(ctx) + extra, ctx.run_dir)
