"""The golden set: hosts that passed health and burn-in, written as hostfiles for jobs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import groupby

from provision.errors import BringupError
from provision.site.index import SiteIndex
from provision.state import State, StateStore
from provision.state.intents import hosts_in_flight, in_flight_line


class HostfileFormat(StrEnum):
    plain = "plain"
    torchrun = "torchrun"
    deepspeed = "deepspeed"
    slurm = "slurm"


@dataclass(frozen=True)
class GoldenHost:
    hostname: str
    rack: str
    gpus: int


class HostfileError(BringupError):
    """The golden set cannot be written in the asked format."""


def golden_hosts(site: SiteIndex, store: StateStore) -> list[GoldenHost]:
    """Golden hosts that have GPUs: a controller or storage host that passed its checks is no slot for
    a training job (it would be `slots=0` in a DeepSpeed hostfile). A host with a change in flight (a reset or
    a deployment asked and not recorded yet, `provision.state.intents`) is left out until it is recorded."""
    by_name = {h.hostname: h for h in site.hosts}
    in_flight = hosts_in_flight(store)
    return [
        GoldenHost(name, by_name[name].rack, by_name[name].gpus)
        for name in store.in_state(State.golden)
        if name in by_name and by_name[name].gpus > 0 and name not in in_flight
    ]


def held_back(store: StateStore) -> dict[str, str]:
    """Golden hosts `golden_hosts` leaves out because a change to them is in flight, with why."""
    golden = set(store.in_state(State.golden))
    return {host: in_flight_line(intents) for host, intents in sorted(hosts_in_flight(store).items())
            if host in golden}


_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")


def compress_hostlist(hostnames: Sequence[str]) -> str:
    """Slurm hostlist notation: gpu-r1-01,gpu-r1-02,gpu-r1-03,gpu-r2-01 → gpu-r1-[01-03],gpu-r2-01."""
    parsed: list[tuple[str, int, int, str]] = []
    for name in sorted(set(hostnames)):
        m = _TRAILING_NUMBER.match(name)
        if m:
            digits = m.group(2)
            padded = len(digits) if digits.startswith("0") and len(digits) > 1 else 1
            parsed.append((m.group(1), padded, int(digits), name))
        else:
            parsed.append((name, 0, -1, name))
    parts: list[str] = []
    for (prefix, width), group in groupby(sorted(parsed), key=lambda p: (p[0], p[1])):
        items = list(group)
        if width == 0:
            parts.extend(item[3] for item in items)
            continue
        ranges: list[tuple[int, int]] = []
        for _, _, num, _ in items:
            if ranges and num == ranges[-1][1] + 1:
                ranges[-1] = (ranges[-1][0], num)
            else:
                ranges.append((num, num))
        if len(items) == 1:
            parts.append(items[0][3])
            continue
        spans = ",".join(
            f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in ranges
        )
        parts.append(f"{prefix}[{spans}]")
    return ",".join(parts)


def render_hostfile(hosts: Sequence[GoldenHost], fmt: HostfileFormat, *, rdzv_port: int = 29500) -> str:
    if fmt is HostfileFormat.plain:
        return "".join(f"{h.hostname}\n" for h in hosts)
    if fmt is HostfileFormat.deepspeed:
        return "".join(f"{h.hostname} slots={h.gpus}\n" for h in hosts)
    if fmt is HostfileFormat.slurm:
        return compress_hostlist([h.hostname for h in hosts]) + "\n" if hosts else ""
    # torchrun: one environment file that a launcher sources on every node.
    if not hosts:
        return ""
    per_node = sorted({h.gpus for h in hosts})
    if len(per_node) > 1:
        # torchrun starts the same number of ranks on every node: a job on mixed hosts would leave GPUs idle.
        counts = ", ".join(f"{n} GPUs: {sum(1 for h in hosts if h.gpus == n)} hosts" for n in per_node)
        raise HostfileError(f"torchrun needs the same GPU count on every node; the golden set mixes {counts} "
                            "(write the deepspeed format, or select hosts of one kind)")
    lines = [
        f"NNODES={len(hosts)}",
        f"NPROC_PER_NODE={per_node[0]}",
        f"RDZV_ENDPOINT={hosts[0].hostname}:{rdzv_port}",
        f"HOSTS=\"{' '.join(h.hostname for h in hosts)}\"",
    ]
    return "\n".join(lines) + "\n"
