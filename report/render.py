"""The report as one static HTML file: Jinja2 templates (package data under templates/), inline CSS, figures
as inline SVG; nothing is fetched when it is opened, and no script runs."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from provision.state.secret_values import mask
from report import svg
from report.model import STATUS_ORDER, Report

MAX_RACK_CHARTS = 6  # past this many racks, the funnel is one racks-by-states figure
MAX_ROWS = 500  # burn-in links listed on the page per table (--json has them all)
SECTIONS = (
    ("funnel", "Lifecycle per rack"),
    ("failed", "Failed hosts"),
    ("fabric", "Fabric map"),
    ("ethernet", "Ethernet check"),
    ("health", "Health heat map"),
    ("firmware", "Firmware and BIOS"),
    ("burnin", "Burn-in per link"),
    ("training", "Training run"),
    ("slurm", "Slurm"),
)


@dataclass(frozen=True)
class Figures:
    funnels: dict[str, Markup]  # one chart per rack, on a site of a few racks
    funnel_matrix: Markup  # all racks in one figure, on a site of many
    heatmap: Markup
    fabric: Markup
    burnin: Markup
    loss: Markup
    mfu: Markup


def figures(report: Report) -> Figures:
    t = report.training
    few = len(report.funnel) <= MAX_RACK_CHARTS
    return Figures({f.rack: svg.funnel(f) for f in report.funnel} if few else {},
                   Markup("") if few else svg.funnel_matrix(report.funnel),
                   svg.heatmap(report.health) if report.health.rows else Markup(""),
                   svg.fabric_map(report.fabric) if report.fabric.switches else Markup(""),
                   svg.burnin(report.burnin) if report.burnin.links else Markup(""),
                   svg.line_chart(t.loss, "loss") if t.loss else Markup(""),
                   svg.line_chart(t.mfu, "MFU", percent=True) if t.mfu else Markup(""))


def environment() -> Environment:
    env = Environment(loader=PackageLoader("report", "templates"), autoescape=select_autoescape(["j2"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(colour=svg.colour, statuses=STATUS_ORDER, max_rows=MAX_ROWS)
    return env


def render_html(report: Report) -> str:
    """The page; any credential this process holds is masked in it, whatever a peer echoed into evidence."""
    return mask(environment().get_template("report.html.j2").render(r=report, fig=figures(report), sections=SECTIONS))


def write_html(report: Report, path: Path) -> Path:
    """Write the page atomically (a reader never sees half a report); the folder is created."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(render_html(report))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
