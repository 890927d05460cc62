"""Build the Ansible inventory (the `ansible-inventory --list` JSON shape) from a site and its state store.

Groups: `rack_<rack>`, `role_<role>`, `class_<host class>`, `state_<state>` for every lifecycle state,
`configurable`: the hosts `site.yml` may configure (deployed or later, or failed after having been
deployed), and, from the site's `slurm` section (empty without one), `slurm_controller` (the host that runs
slurmctld) and `slurm_nodes` (the GPU hosts of the partitions' host classes). Host variables: how to reach
the host (from the site's `ssh` settings), where it sits, its BMC (address only, never a credential), the
hardware and versions its class expects, its state.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provision.health.expectations import load_overlay
from provision.site import Site, load_site
from provision.site.endpoints import split_host_port
from provision.site.firmware import baseline_images
from provision.site.model import Host, HostClass, Role
from provision.site.slurm import gres_type
from provision.site.store import open_store
from provision.state import HostRecord, State
from provision.state.lifecycle import FLOW

CONFIGURABLE_GROUP = "configurable"
SLURM_CONTROLLER_GROUP = "slurm_controller"
SLURM_NODES_GROUP = "slurm_nodes"
FIRST_CONFIGURABLE = State.deployed

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def group_name(prefix: str, value: str) -> str:
    """A valid Ansible group name: `rack_r1`, `class_hgx_h200_sim`."""
    return f"{prefix}_{_UNSAFE.sub('_', value)}"


@dataclass(frozen=True)
class Inventory:
    hostvars: Mapping[str, Mapping[str, Any]]
    groups: Mapping[str, tuple[str, ...]]
    all_vars: Mapping[str, Any] = field(default_factory=dict)

    def as_list(self) -> dict[str, Any]:
        """The JSON `ansible-inventory --list` (and a script inventory) prints."""
        out: dict[str, Any] = {
            "_meta": {"hostvars": {h: dict(v) for h, v in self.hostvars.items()}},
            "all": {"children": ["ungrouped", *sorted(self.groups)], "vars": dict(self.all_vars)},
            "ungrouped": {"hosts": []},
        }
        for name, hosts in sorted(self.groups.items()):
            out[name] = {"hosts": list(hosts)}
        return out


def _configurable(record: HostRecord | None) -> bool:
    if record is None:
        return False
    rank = {state: i for i, state in enumerate(FLOW)}
    if record.state is State.failed:
        return record.resume_from is not None and rank[record.resume_from] >= rank[FIRST_CONFIGURABLE]
    return rank[record.state] >= rank[FIRST_CONFIGURABLE]


def _hardware(cls: HostClass) -> dict[str, Any]:
    return {
        "gpu": cls.gpu.model_dump() if cls.gpu else None,
        "ib": cls.ib.model_dump(mode="json") if cls.ib else None,
        "pcie": cls.pcie.model_dump() if cls.pcie else None,
        "nvme_data_disks": cls.nvme_data_disks,
        "nvswitch": cls.nvswitch,
    }


def _address(site: Site, hostname: str) -> tuple[str, int]:
    """Where the host is reached (the site's `ssh.address_overrides`, else its name) and on which SSH port."""
    ssh = site.spec.ssh
    return split_host_port(ssh.address_overrides.get(hostname, hostname), ssh.port)


def _slurm_nodes(site: Site) -> dict[str, dict[str, Any]]:
    """The Slurm nodes, by name: every GPU host of a host class that a partition names, with its address
    (NodeAddr), class and GPUs (`Gres=gpu:<type>:<count>`; roles/slurm_conf, roles/slurm_node)."""
    slurm = site.spec.slurm
    if slurm is None:
        return {}
    classes = {name for partition in slurm.partitions for name in partition.classes}
    nodes: dict[str, dict[str, Any]] = {}
    for host in sorted(site.hosts(), key=lambda h: h.hostname):
        if host.role is not Role.gpu or host.host_class not in classes:
            continue
        gpu = site.host_class(host).gpu
        nodes[host.hostname] = {
            "address": _address(site, host.hostname)[0],
            "class": host.host_class,
            "gpus": gpu.count if gpu else 0,
            "gpu_type": gres_type(gpu.model) if gpu else "",
        }
    return nodes


def _host_vars(site: Site, host: Host, record: HostRecord | None,
               health_overlay: Mapping[str, Any]) -> dict[str, Any]:
    ssh = site.spec.ssh
    cls = site.host_class(host)
    address, port = _address(site, host.hostname)
    out: dict[str, Any] = {
        "ansible_host": address,
        "ansible_user": ssh.user,
        "ansible_port": port,
        "bringup_rack": host.rack,
        "bringup_u": host.u,
        "bringup_role": host.role.value,
        "bringup_class": host.host_class,
        "bringup_bmc": {"address": host.bmc.address, "port": host.bmc.port},
        "bringup_hardware": _hardware(cls),
        "bringup_versions": cls.version_facts(),  # with the firmware baseline's HCA/GPU pins (#40)
        # the baseline's on-host images (roles/hca_firmware): path on this controller and SHA-256
        "bringup_firmware_images": baseline_images(cls.firmware, site.directory),
        "bringup_floors": cls.floors.model_dump(),  # the health agent's floors (roles/health_agent)
        # the site's health-expectations.yml for this class: what the controller merges in, the role does too
        "bringup_health_overlay": dict(health_overlay),
        "bringup_state": record.state.value if record else State.declared.value,
    }
    if record is not None and record.state is State.failed:
        out["bringup_state_reason"] = record.reason
        out["bringup_resume_from"] = record.resume_from.value if record.resume_from else None
    if ssh.key_file:
        out["ansible_ssh_private_key_file"] = str((site.directory / ssh.key_file).resolve())
    common_args = [f"-o ConnectTimeout={int(ssh.connect_timeout_s)}"]
    if ssh.known_hosts:
        known = (site.directory / ssh.known_hosts).resolve()
        common_args.append(f"-o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes")
    else:
        common_args.append("-o StrictHostKeyChecking=accept-new")  # the site's choice: trust on first use
    out["ansible_ssh_common_args"] = " ".join(common_args)
    return out


def build_inventory(site: Site, records: Mapping[str, HostRecord], *, state_db: Path | None = None,
                    health_overlays: Mapping[str, Mapping[str, Any]] | None = None) -> Inventory:
    """Pure: the inventory for `site` given the state store's records (hosts it lacks count as declared) and
    the site's health-expectations overlay per host class."""
    overlays = health_overlays or {}
    hostvars: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[str]] = {group_name("state", s.value): [] for s in State}
    groups[CONFIGURABLE_GROUP] = []
    slurm_nodes = _slurm_nodes(site)
    groups[SLURM_NODES_GROUP] = list(slurm_nodes)
    # The controller is configured like any host: once bringup has it deployed (or an operator records it so);
    # a head node the lifecycle never reached (the sim site's ctl-01) gets no play.
    controller = site.spec.slurm.controller if site.spec.slurm is not None else None
    groups[SLURM_CONTROLLER_GROUP] = [controller] if controller and _configurable(records.get(controller)) else []
    for host in site.hosts():
        record = records.get(host.hostname)
        hostvars[host.hostname] = _host_vars(site, host, record, overlays.get(host.host_class, {}))
        state = record.state if record else State.declared
        for group in (
            group_name("rack", host.rack),
            group_name("role", host.role.value),
            group_name("class", host.host_class),
            group_name("state", state.value),
        ):
            groups.setdefault(group, []).append(host.hostname)
        if _configurable(record):
            groups[CONFIGURABLE_GROUP].append(host.hostname)
    all_vars: dict[str, Any] = {"bringup_site_name": site.name, "bringup_site_file": str(site.path.resolve()),
                                # [] when the site names none: the common role then uses pool.ntp.org
                                "bringup_ntp_servers": list(site.spec.ntp.servers),
                                # the apt cache, batches and forks (provision/site/rollout.py; roles/apt_proxy)
                                "bringup_rollout": site.spec.rollout.as_vars()}
    if site.spec.slurm is not None:  # the scheduler's settings (provision/site/slurm.py; roles/slurm_*)
        all_vars["bringup_slurm"] = site.spec.slurm.as_vars()
        # what slurm.conf says of the nodes and where slurmctld listens (SlurmctldHost=name(address))
        all_vars["bringup_slurm_nodes"] = slurm_nodes
        all_vars["bringup_slurm_controller_address"] = _address(site, site.spec.slurm.controller)[0]
    if state_db is not None:
        all_vars["bringup_state_db"] = str(state_db.resolve())
    return Inventory(
        hostvars=hostvars,
        groups={name: tuple(sorted(hosts)) for name, hosts in groups.items()},
        all_vars=all_vars,
    )


def load_inventory(site_path: Path, state_db: Path | None = None) -> Inventory:
    """Read the site and the state store (declaring hosts the store does not know yet) and build. The store is
    `state_db` if given, else `$BRINGUP_STATE_DB`, else state/<site>.db beside the site file."""
    site = load_site(site_path)
    db = site.paths.state_db(state_db)
    with open_store(site, state_db) as store:
        store.sync_site((h.hostname, h.rack) for h in site.hosts())
        records = {r.hostname: r for r in store.hosts()}
    return build_inventory(site, records, state_db=db, health_overlays=load_overlay(site))
