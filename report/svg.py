"""The report's figures as inline SVG strings (no script, no external file): the funnel per rack, the
health heat map, the fabric map, the burn-in per link and the training curves. Every text is escaped."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

from report.model import STATUS_RANK, Burnin, BurninLink, FabricMap, HealthMatrix, Point, RackFunnel

COLOURS = {
    "pass": "#2e9d5b", "ok": "#2e9d5b", "golden": "#c9a227", "fail": "#d62728", "critical": "#d62728",
    "disabled": "#6a3d9a", "finding": "#ff7f0e", "unknown": "#e6a700", "warn": "#f2c94c",
    "not_covered": "#9e9e9e", "not_applicable": "#d9d9d9", "untested": "#eeeeee",
}
MAX_BARS = 1200
MAX_PER_ROW = 32  # boxes on one line of the fabric map
TIER_GAP, LINE_GAP = 130.0, 56.0
NO_RATE_BAR = 24.0
FONT = 'font-family="sans-serif" font-size="11"'


def colour(status: str) -> str:
    return COLOURS.get(status, "#bbbbbb")


def _svg(width: float, height: float, body: Sequence[str], label: str) -> Markup:
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(label)}" '
            f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}">')
    return Markup(head + "".join(body) + "</svg>")


def _text(x: float, y: float, text: str, extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" {FONT} {extra}>{escape(text)}</text>'


def funnel(rack: RackFunnel) -> Markup:
    """One bar per lifecycle state: how many of the rack's hosts reached it."""
    label_w, bar_w, row_h = 110, 220, 16
    body = []
    for i, stage in enumerate(rack.stages):
        y = i * row_h
        w = bar_w * stage.hosts / rack.hosts if rack.hosts else 0
        fill = colour("golden") if stage.state == "golden" else "#4c78a8"
        body += [_text(0, y + 12, stage.state),
                 f'<rect x="{label_w}" y="{y + 2}" width="{bar_w}" height="{row_h - 4}" fill="#f0f0f0"/>',
                 f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row_h - 4}" fill="{fill}">'
                 f'<title>{escape(f"{stage.hosts} of {rack.hosts} reached {stage.state}")}</title></rect>',
                 _text(label_w + bar_w + 6, y + 12, str(stage.hosts))]
    return _svg(label_w + bar_w + 40, len(rack.stages) * row_h, body, f"lifecycle funnel of rack {rack.rack}")


def funnel_matrix(racks: Sequence[RackFunnel]) -> Markup:
    """Many racks at once: one row per rack, one column per state, each cell the share of the rack's hosts
    that reached the state (darker: more), with the count; failed and golden at the end of the row."""
    label_w, cell_w, row_h, head_h = 70, 62, 16, 60
    states = [s.state for s in racks[0].stages] if racks else []
    body = [_text(label_w + j * cell_w + 4, head_h - 6, state, f'transform="rotate(-30 {label_w + j * cell_w + 4} '
                  f'{head_h - 6})"') for j, state in enumerate([*states, "failed"])]
    for i, rack in enumerate(racks):
        y = head_h + i * row_h
        body.append(_text(0, y + 12, f"rack {rack.rack}"))
        for j, stage in enumerate(rack.stages):
            share = stage.hosts / rack.hosts if rack.hosts else 0.0
            fill = colour("golden") if stage.state == "golden" else "#4c78a8"
            tip = escape(f"rack {rack.rack}: {stage.hosts} of {rack.hosts} reached {stage.state}")
            body += [f'<rect x="{label_w + j * cell_w}" y="{y + 1}" width="{cell_w - 2}" height="{row_h - 2}" '
                     f'fill="{fill}" fill-opacity="{0.15 + 0.85 * share:.2f}"><title>{tip}</title></rect>',
                     _text(label_w + j * cell_w + 4, y + 12, f"{stage.hosts}/{rack.hosts}")]
        x = label_w + len(states) * cell_w + 4
        failed = _text(x, y + 12, str(rack.failed), 'fill="#b00020" text-decoration="underline"')
        body.append(f'<a href="#failed">{failed}</a>' if rack.failed else _text(x, y + 12, "0"))
    width = label_w + (len(states) + 1) * cell_w + 20
    return _svg(width, head_h + len(racks) * row_h + 4, body, "lifecycle funnel: racks by states")


def heatmap(matrix: HealthMatrix) -> Markup:
    """Hosts down, checks across; a failed host's name links to its entry."""
    cell, label_w, head_h = 14, 120, 150
    body = []
    for j, check in enumerate(matrix.checks):
        x = label_w + j * cell + cell - 3
        body.append(_text(x, head_h - 4, check, f'transform="rotate(-60 {x} {head_h - 4})"'))
    for i, row in enumerate(matrix.rows):
        y = head_h + i * cell
        if row.failed:
            name = _text(0, y + 11, row.host, 'fill="#b00020" text-decoration="underline"')
            body.append(f'<a href="#host-{escape(row.host)}">{name}</a>')
        else:
            body.append(_text(0, y + 11, row.host))
        for j, c in enumerate(row.cells):
            tip = escape(f"{row.host} {c.check}: {c.status} - {c.summary}")
            body.append(f'<rect x="{label_w + j * cell}" y="{y}" width="{cell - 1}" height="{cell - 1}" '
                        f'fill="{colour(c.status)}" class="cell-{escape(c.status)}"><title>{tip}</title></rect>')
    width = label_w + max(1, len(matrix.checks)) * cell + 60
    return _svg(width, head_h + len(matrix.rows) * cell + 4, body, "health heat map: hosts by checks")


def _positions(fabric: FabricMap, box_w: float, gap: float) -> tuple[dict[str, tuple[float, float]], float, float]:
    """Where each box goes: a row per tier (the top tier first, host racks last), in location order, a row
    longer than MAX_PER_ROW wrapped onto the next line of its tier."""
    tiers = sorted({s.tier for s in fabric.switches}, reverse=True)
    rows: list[list[str]] = [[s.name for s in fabric.switches if s.tier == t] for t in tiers] + [list(fabric.racks)]
    lines = [(k, names[i:i + MAX_PER_ROW]) for k, names in enumerate(rows) for i in range(0, len(names), MAX_PER_ROW)]
    width = max(len(names) for _, names in lines) * (box_w + gap) + gap
    pos: dict[str, tuple[float, float]] = {}
    y, last = 30.0 - TIER_GAP, -1
    for k, names in lines:
        y += TIER_GAP if k != last else LINE_GAP
        last = k
        offset = (width - len(names) * (box_w + gap)) / 2
        for i, name in enumerate(names):
            pos[name] = (offset + i * (box_w + gap) + gap / 2, y)
    return pos, width, y + 60


def fabric_map(fabric: FabricMap) -> Markup:
    """Tiers as rows (the top tier first, host racks last), each switch at its place in its row ordered by
    its physical location; one line per switch pair (or per rack and leaf), coloured by its worst cable."""
    box_w, box_h, gap = 96.0, 40.0, 12.0
    pos, width, height = _positions(fabric, box_w, gap)
    body = []
    for link in sorted(fabric.links, key=lambda lk: -STATUS_RANK.get(lk.status, len(STATUS_RANK))):
        (ax, ay), (bx, by) = pos[link.a], pos[link.b]
        top, bottom = ((ax, ay), (bx, by)) if ay < by else ((bx, by), (ax, ay))
        stroke = 3 if link.status in ("disabled", "fail", "finding", "unknown") else 1.2
        dash = ' stroke-dasharray="6 3"' if link.status == "disabled" else ""
        body.append(f'<line x1="{top[0] + box_w / 2:.1f}" y1="{top[1] + box_h:.1f}" x2="{bottom[0] + box_w / 2:.1f}" '
                    f'y2="{bottom[1]:.1f}" stroke="{colour(link.status)}" stroke-width="{stroke}"{dash} '
                    f'class="link link-{escape(link.status)}"><title>{escape(link.detail)}</title></line>')
    where = {s.name: s for s in fabric.switches}
    for name, (x, y) in pos.items():
        sw = where.get(name)
        sub = sw.location.replace("row ", "").replace(" rack ", "/") if sw else "hosts"
        tip = f"{name}: {sw.model} tier {sw.tier}, {sw.location}, {sw.links} cables" if sw else name
        body += [f'<g><title>{escape(tip)}</title><rect x="{x:.1f}" y="{y:.1f}" width="{box_w}" '
                 f'height="{box_h}" rx="4" fill="{"#ffffff" if sw else "#eef3fb"}" stroke="#555"/>',
                 _text(x + 4, y + 16, name[:16]), _text(x + 4, y + 31, sub[:16], 'fill="#666"'), "</g>"]
    return _svg(width, height, body, "fabric map by tier and location")


def _buckets(links: Sequence[BurninLink]) -> list[tuple[float | None, str, str]]:
    """(Gb/s, verdict, tooltip) per bar: one per link, or on a large fabric one per run of neighbouring links,
    drawn at the slowest of them in the colour of the worst."""
    size = max(1, -(-len(links) // MAX_BARS))
    bars = []
    for i in range(0, len(links), size):
        group = links[i:i + size]
        verdict = min((lk.verdict for lk in group), key=lambda v: STATUS_RANK.get(v, len(STATUS_RANK)))
        rates = [lk.gbps for lk in group if lk.gbps is not None]
        first = group[0]
        tip = (f"{first.name}: {first.verdict}, {first.gbps if first.gbps is not None else 'no rate'} Gb/s - "
               f"{first.reason}") if size == 1 else f"{len(group)} links, {verdict} the worst, " + (
               f"{min(rates):g}-{max(rates):g} Gb/s" if rates else "no rate")
        bars.append((min(rates) if rates else None, verdict, tip))
    return bars


def burnin(result: Burnin) -> Markup:
    """Every directed link's best Gb/s, worst verdict first, coloured by it, with the floor as a line (a link
    no flow measured at full rate is a short bar)."""
    links = sorted(result.links, key=lambda lk: (STATUS_RANK.get(lk.verdict, 99), lk.gbps or 0.0, lk.name))
    bars = _buckets(links)
    top = max([lk.gbps or 0.0 for lk in links] + [result.floor_gbps, 1.0]) * 1.1
    w, h, left = max(400.0, min(1200.0, 3.0 * len(bars))), 200.0, 50.0
    step = w / max(1, len(bars))
    body = [f'<line x1="{left}" y1="{h}" x2="{left + w}" y2="{h}" stroke="#333"/>',
            _text(0, 12, f"{top:.0f} Gb/s"), _text(0, h, "0")]
    floor_y = h - h * result.floor_gbps / top
    body.append(f'<line x1="{left}" y1="{floor_y:.1f}" x2="{left + w}" y2="{floor_y:.1f}" stroke="#d62728" '
                f'stroke-dasharray="4 2"><title>floor {result.floor_gbps:g} Gb/s</title></line>')
    for i, (gbps, verdict, tip) in enumerate(bars):
        bar = h * gbps / top if gbps else NO_RATE_BAR
        body.append(f'<rect x="{left + i * step:.2f}" y="{h - bar:.1f}" width="{max(step - 0.5, 0.5):.2f}" '
                    f'height="{bar:.1f}" fill="{colour(verdict)}"><title>{escape(tip)}</title></rect>')
    return _svg(left + w + 10, h + 20, body, "burn-in: best Gb/s per directed link")


def line_chart(points: Sequence[Point], what: str, percent: bool = False) -> Markup:
    w, h, left, bottom = 560.0, 200.0, 60.0, 24.0
    values = [p.value * (100 if percent else 1) for p in points]
    lo, hi = min(values), max(values)
    hi = hi if hi > lo else lo + 1.0
    first, last = points[0].step, max(points[-1].step, points[0].step + 1)

    def xy(p: Point, v: float) -> str:
        return f"{left + w * (p.step - first) / (last - first):.1f},{h - h * (v - lo) / (hi - lo):.1f}"

    unit = "%" if percent else ""
    body = ['<polyline fill="none" stroke="#4c78a8" stroke-width="1.5" points="'
            + " ".join(xy(p, v) for p, v in zip(points, values, strict=True)) + '"/>',
            f'<line x1="{left}" y1="{h}" x2="{left + w}" y2="{h}" stroke="#333"/>',
            f'<line x1="{left}" y1="0" x2="{left}" y2="{h}" stroke="#333"/>',
            _text(0, 12, f"{hi:.3g}{unit}"), _text(0, h, f"{lo:.3g}{unit}"),
            _text(left, h + 16, f"step {first}"), _text(left + w - 50, h + 16, f"step {last}")]
    return _svg(left + w + 10, h + bottom, body, f"{what} per step")
