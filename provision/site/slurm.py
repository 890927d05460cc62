"""The site's `slurm` section: the scheduler that places jobs on the golden set.

    slurm:
      cluster_name: sim
      controller: ctl-01              # the site host that runs slurmctld (roles/slurm_controller)
      partitions:
        - {name: gpu, classes: [hgx-h200-sim], default: true}
      on_leave: drain                 # a host that leaves golden: drain (running jobs finish) or down (killed)
      commands_dir: /usr/bin          # where scontrol/sinfo are on the bringup controller (default: PATH)
      conf: /etc/slurm/slurm.conf     # the SLURM_CONF they read (default: Slurm's own default)
      timeout_s: 20                   # deadline of each Slurm command
      health_check_interval_s: 300    # slurmd runs the health agent's fast level this often (0: never)
      sync_after_steps: true          # steps that move hosts in or out of golden end with a sync

The Ansible side reads it through the inventory (`bringup_slurm`, with `bringup_slurm_nodes`, the
nodes slurm.conf lists, and the groups `slurm_controller`/`slurm_nodes`: provision/ansible_inventory/build.py;
roles/munge, roles/slurm_conf, roles/slurm_controller, roles/slurm_node); `provision slurm sync`
(provision/slurm/) keeps Slurm's node states in step with the lifecycle.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_SLURM_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_VENDOR = re.compile(r"^\s*nvidia\s+", re.IGNORECASE)
_NOT_GRES = re.compile(r"[^a-z0-9_]+")


def _slurm_name(value: str) -> str:
    if not _SLURM_NAME.match(value):
        raise ValueError(f"{value!r} is not a Slurm name (letters, digits, '_', '.', '-'; at most 64)")
    return value


def gres_type(gpu_model: str) -> str:
    """The GRES type of a GPU model for slurm.conf and gres.conf (`Gres=gpu:<type>:<count>`): the model without
    its vendor, lower case, anything but letters, digits and '_' made one '_' ("NVIDIA H200" -> "h200",
    "NVIDIA H100 80GB HBM3" -> "h100_80gb_hbm3"); "" when nothing is left (the line then names no type)."""
    return _NOT_GRES.sub("_", _VENDOR.sub("", gpu_model).lower()).strip("_")[:64]


class SlurmPartition(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="the partition's name in slurm.conf")
    classes: list[str] = Field(min_length=1, description="host classes whose GPU hosts belong to it")
    default: bool = False
    max_time: str = Field("INFINITE", pattern=r"^(INFINITE|UNLIMITED|[0-9]+(-[0-9]{1,2})?(:[0-9]{1,2}){0,2})$",
                          description="MaxTime: INFINITE, minutes, or days-hours:minutes:seconds")

    _name = field_validator("name")(classmethod(lambda cls, v: _slurm_name(v)))


class Slurm(BaseModel):
    """How bringup reaches the site's Slurm and what it does to a node that leaves or earns golden."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster_name: str = Field(description="ClusterName in slurm.conf")
    controller: str = Field(min_length=1, description="the site host that runs slurmctld")
    controller_port: int = Field(6817, ge=1, le=65535, description="SlurmctldPort")
    node_port: int = Field(6818, ge=1, le=65535, description="SlurmdPort")
    partitions: list[SlurmPartition] = Field(min_length=1)
    on_leave: Literal["drain", "down"] = Field(
        "drain", description="drain: no new jobs, running ones finish; down: running jobs are killed (requeued)")
    commands_dir: str | None = Field(None, description="directory of scontrol and sinfo here (default: PATH)")
    conf: str | None = Field(None, description="SLURM_CONF of those commands (default: Slurm's)")
    timeout_s: float = Field(20.0, gt=0, le=600, description="deadline of each Slurm command")
    health_check_interval_s: int = Field(300, ge=0, le=86400, description="HealthCheckInterval (0: off)")
    sync_after_steps: bool = Field(True, description="health, burn-in and port steps end with a sync")

    _cluster = field_validator("cluster_name")(classmethod(lambda cls, v: _slurm_name(v)))

    @model_validator(mode="after")
    def _partitions(self) -> Self:
        names = [p.name for p in self.partitions]
        if len(set(names)) != len(names):
            raise ValueError(f"partition names repeat: {names}")
        if sum(p.default for p in self.partitions) > 1:
            raise ValueError("more than one partition has default: true")
        return self

    def partitions_of(self, host_class: str) -> list[str]:
        return [p.name for p in self.partitions if host_class in p.classes]

    def as_vars(self) -> dict[str, Any]:
        """What the roles read (inventory `bringup_slurm`)."""
        return self.model_dump(mode="json", exclude={"commands_dir", "conf", "timeout_s", "sync_after_steps"})
