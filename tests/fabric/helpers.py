from __future__ import annotations

from fabric.design import Design
from fabric.parsers import parse_iblinkinfo, parse_ibnetdiscover
from fabric.pipeline import Result, run
from fabric.topology import merge
from sim.asbuilt import AsBuilt, render_iblinkinfo

FIRST_HCA = "gpu-r1-01/mlx5_0"


def discover(ab: AsBuilt, design: Design, starts: tuple[str, ...] = (FIRST_HCA,), fmt: str = "ibnetdiscover") -> Result:
    """Validate what ibnetdiscover (or iblinkinfo) run from each `starts` HCA would report."""
    tops = []
    for start in starts:
        reach = ab.reachable(start)
        if fmt == "iblinkinfo":
            tops.append(parse_iblinkinfo(render_iblinkinfo(ab, reach), f"iblinkinfo@{start}"))
        else:
            tops.append(parse_ibnetdiscover(ab.render(only=reach), f"ibnetdiscover@{start}"))
    return run(design, merge(tops))


def kinds(result: Result) -> list[str]:
    return [f.kind for f in result.report.findings]
