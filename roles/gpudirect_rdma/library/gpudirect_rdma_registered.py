"""Check that nvidia-peermem registered itself as a peer-memory client, not only that modprobe succeeded.

nvidia-peermem registers with the RDMA stack's peer-memory API (ib_register_peer_memory_client, from
MLNX_OFED/DOCA-OFED); the registration shows as the directory /sys/kernel/mm/memory_peers/nv_mem. A module
built against another RDMA stack than the one loaded can load and register nothing (GPUDirect RDMA then
silently falls back to staging through host memory). The verdict is a pure function (`verdict`),
unit-tested in tests/ansible/test_gpudirect_registered.py (a test host shares the controller's kernel).
"""

from __future__ import annotations

from pathlib import Path

DOCUMENTATION = r"""
module: gpudirect_rdma_registered
short_description: Fail when nvidia-peermem is loaded but not registered as a peer-memory client
options:
  kernel: {type: str, required: true, description: the running kernel, named in the remediation}
author: bringup
"""

RETURN = r"""
registered: {type: bool, description: whether /sys/kernel/mm/memory_peers/nv_mem exists}
"""

NV_MEM = Path("/sys/kernel/mm/memory_peers/nv_mem")


def verdict(registered: bool, peers_dir: bool, kernel: str) -> str | None:
    """The message that says what to fix when nv_mem is not registered, else None."""
    if registered:
        return None
    why = ("the RDMA stack has no peer-memory API (/sys/kernel/mm/memory_peers is missing: inbox rdma-core, "
           "or openibd did not load the OFED modules)" if not peers_dir else
           "the RDMA stack's peer-memory API has no nv_mem client")
    return (f"nvidia-peermem loaded but did not register ({NV_MEM} is missing): {why}. GPUDirect RDMA is off. "
            f"Rebuild the NVIDIA DKMS modules against the installed OFED (dkms autoinstall -k {kernel}, or "
            "reinstall the driver's -dkms package), restart openibd, then modprobe -r nvidia_peermem && "
            "modprobe nvidia_peermem")


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]

    module = AnsibleModule(argument_spec={"kernel": {"type": "str", "required": True}}, supports_check_mode=True)
    registered = NV_MEM.is_dir()
    problem = verdict(registered, NV_MEM.parent.is_dir(), module.params["kernel"])
    if problem:
        module.fail_json(msg=problem, registered=False)
    module.exit_json(changed=False, registered=True)


if __name__ == "__main__":
    main()
