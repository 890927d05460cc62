from __future__ import annotations

from fabric.burnin.lft import parse_lfts
from fabric.burnin.routes import Routing, build_routing
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from tests.fabric.conftest import FIXTURES

BURNIN = FIXTURES / "burnin"
GPU_HOSTS = {f"gpu-r{r}-{s:02d}" for r in (1, 2) for s in range(1, 9)}


def text(name: str) -> str:
    return (BURNIN / name).read_text(encoding="utf-8")


def sim_routing(engine: str = "ftree", hosts: set[str] | None = None, lfts: str | None = None) -> Routing:
    top = parse_ibnetdiscover(text("sim-site.ibnetdiscover.txt"))
    dump = parse_lfts(lfts if lfts is not None else text(f"sim-site.{engine}.dump_lfts.txt"))
    return build_routing(top, dump, hosts)
