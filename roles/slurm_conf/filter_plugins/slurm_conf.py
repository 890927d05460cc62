"""The node and partition lines of slurm.conf from the bringup inventory's nodes (roles/slurm_conf).

    {{ slurm_conf_nodes | slurm_conf_fact_hosts(groups['configurable']) }}       {class: host whose facts count}
    {{ slurm_conf_fact_hosts | slurm_conf_resources(hostvars, 8192) }}           {class: {CPUs, RealMemory}}
    {{ slurm_conf_nodes | slurm_conf_node_lines(resources, class_attrs, node_attrs) }}
    {{ slurm_conf_partitions | slurm_conf_partition_lines(slurm_conf_nodes) }}

`nodes` is the inventory's `bringup_slurm_nodes`: {name: {address, class, gpus, gpu_type}}. Pure functions of
plain data (the one exception reads facts out of `hostvars`); they import nothing from Ansible, so tests call them
in-process. Syntax: slurm.conf(5) of Slurm 22.05 (NODE CONFIGURATION, PARTITION CONFIGURATION).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# A value slurm.conf would read as more than one (whitespace, '#' starts a comment) or no value at all.
_BAD_VALUE = re.compile(r"[\s#]|^$")


class SlurmConfError(ValueError):
    """A node or partition slurm.conf cannot say."""


def _value(key: str, value: Any, where: str) -> str:
    text = ("YES" if value else "NO") if isinstance(value, bool) else str(value)
    if _BAD_VALUE.search(text):
        raise SlurmConfError(f"{where}: {key}={text!r} is not a slurm.conf value (empty, a space or a '#')")
    return text


def slurm_conf_fact_hosts(nodes: Mapping[str, Mapping[str, Any]], candidates: Iterable[str]) -> dict[str, str]:
    """Per host class, the first node (by name) that is one of `candidates`: the host whose facts give the class's
    CPUs and memory, the same whichever hosts a play runs on."""
    allowed = set(candidates)
    out: dict[str, str] = {}
    for name in sorted(nodes):
        cls = str(nodes[name]["class"])
        if cls not in out and name in allowed:
            out[cls] = name
    return out


def slurm_conf_resources(fact_hosts: Mapping[str, str], hostvars: Mapping[str, Any],
                         reserve_mb: int) -> dict[str, dict[str, int]]:
    """{class: {CPUs, RealMemory}} for the classes whose fact host has `processor_vcpus` and `memtotal_mb` facts:
    RealMemory is MemTotal less `reserve_mb` (at least 1)."""
    out: dict[str, dict[str, int]] = {}
    for cls, host in fact_hosts.items():
        try:
            facts = hostvars[host]["ansible_facts"] or {}
        except (KeyError, TypeError):
            continue
        cpus, memory = facts.get("processor_vcpus"), facts.get("memtotal_mb")
        if cpus is None or memory is None:
            continue
        out[cls] = {"CPUs": int(cpus), "RealMemory": max(int(memory) - int(reserve_mb), 1)}
    return out


def slurm_conf_node_lines(nodes: Mapping[str, Mapping[str, Any]], resources: Mapping[str, Mapping[str, Any]],
                          class_attributes: Mapping[str, Mapping[str, Any]] | None = None,
                          node_attributes: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """One `NodeName=` line per node, by name: NodeAddr, CPUs and RealMemory of its class (when known),
    Gres=gpu[:type]:count (when it has GPUs), then the class's and the node's own attributes (which replace
    a computed one of the same name)."""
    class_attributes = class_attributes or {}
    node_attributes = node_attributes or {}
    lines = []
    for name in sorted(nodes):
        node = nodes[name]
        cls = str(node["class"])
        attrs: dict[str, Any] = {"NodeAddr": node["address"], **resources.get(cls, {})}
        gpus = int(node.get("gpus") or 0)
        if gpus > 0:
            gpu_type = str(node.get("gpu_type") or "")
            attrs["Gres"] = f"gpu:{gpu_type}:{gpus}" if gpu_type else f"gpu:{gpus}"
        attrs.update(class_attributes.get(cls, {}))
        attrs.update(node_attributes.get(name, {}))
        where = f"node {name}"
        lines.append(" ".join([f"NodeName={_value('NodeName', name, where)}",
                               *(f"{k}={_value(k, v, where)}" for k, v in attrs.items())]))
    return lines


def slurm_conf_partition_lines(partitions: Iterable[Mapping[str, Any]],
                               nodes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One `PartitionName=` line per partition: its nodes (those of its host classes, by name; none: no Nodes=),
    Default, MaxTime, State=UP."""
    lines = []
    for partition in partitions:
        name = str(partition["name"])
        classes = set(partition.get("classes") or [])
        members = [n for n in sorted(nodes) if nodes[n]["class"] in classes]
        where = f"partition {name}"
        parts = [f"PartitionName={_value('PartitionName', name, where)}"]
        if members:
            parts.append(f"Nodes={','.join(members)}")
        parts += [f"Default={_value('Default', bool(partition.get('default', False)), where)}",
                  f"MaxTime={_value('MaxTime', partition.get('max_time', 'INFINITE'), where)}", "State=UP"]
        lines.append(" ".join(parts))
    return lines


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "slurm_conf_fact_hosts": slurm_conf_fact_hosts,
            "slurm_conf_resources": slurm_conf_resources,
            "slurm_conf_node_lines": slurm_conf_node_lines,
            "slurm_conf_partition_lines": slurm_conf_partition_lines,
        }
