"""GPUDirect RDMA over dma-buf, for an upstream (inbox) RDMA stack that has no peer-memory API.

nvidia-peermem registers with the peer-memory API of MLNX_OFED/DOCA-OFED (ib_register_peer_memory_client); the
upstream kernel's RDMA stack (Debian's and Ubuntu's inbox rdma-core) has none, so there GPU memory reaches the HCA
through dma-buf instead: the NVIDIA open kernel modules export GPU memory as dma-buf, the kernel's RDMA core
imports it (ib_umem_dmabuf, Linux 5.12 and later), and NCCL uses it when NCCL_DMABUF_ENABLE is on (its default)
and the stack supports it. NVIDIA's GPU Operator documentation recommends DMA-BUF over nvidia-peermem
(https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-rdma.html); NCCL's variable:
https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html (NCCL_DMABUF_ENABLE).

The prerequisites read here: the running kernel at 5.12 or later, the kernel built with CONFIG_DMA_SHARED_BUFFER
(its /boot/config-<kernel>), and the installed nvidia module being the open one (modinfo license "Dual MIT/GPL";
the proprietary module says "NVIDIA"). The verdict is a pure function (`verdict`), unit-tested in
tests/ansible/test_gpudirect_registered.py; what cannot be read is "unknown", kept apart from "failed".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DOCUMENTATION = r"""
module: gpudirect_rdma_dmabuf
short_description: Check the dma-buf prerequisites of GPUDirect RDMA on an inbox RDMA stack
options:
  kernel: {type: str, required: true, description: the running kernel release}
  kernel_config: {type: str, required: false, default: "", description: its config line; "" unknown}
  nvidia_license: {type: str, required: false, default: "", description: nvidia's license; "" none}
author: bringup
"""

RETURN = r"""
method: {type: str, description: "dmabuf"}
unknown: {type: list, description: prerequisites that could not be read}
"""

MIN_KERNEL = (5, 12)
OPEN_LICENSE = "Dual MIT/GPL"


@dataclass(frozen=True)
class Verdict:
    failed: tuple[str, ...]
    unknown: tuple[str, ...]


def kernel_version(release: str) -> tuple[int, int] | None:
    """(major, minor) of a kernel release such as 6.1.0-28-amd64; None when it does not parse."""
    match = re.match(r"^(\d+)\.(\d+)", release)
    return (int(match.group(1)), int(match.group(2))) if match else None


def verdict(kernel: str, kernel_config: str, nvidia_license: str) -> Verdict:
    """What stops dma-buf GPUDirect RDMA on this host (failed), and what could not be read (unknown)."""
    failed: list[str] = []
    unknown: list[str] = []
    version = kernel_version(kernel)
    if version is None:
        unknown.append(f"kernel release {kernel!r} does not parse as major.minor")
    elif version < MIN_KERNEL:
        failed.append(f"kernel {kernel} is older than 5.12, which the RDMA core's dma-buf import (ib_umem_dmabuf) "
                      "needs: boot a newer kernel, or use DOCA-OFED/MLNX_OFED with nvidia-peermem "
                      "(versions.ofed_source)")
    if not kernel_config:
        unknown.append(f"/boot/config-{kernel} could not be read (CONFIG_DMA_SHARED_BUFFER unknown)")
    elif not re.search(r"^CONFIG_DMA_SHARED_BUFFER=y$", kernel_config, re.MULTILINE):
        failed.append(f"kernel {kernel} is built without CONFIG_DMA_SHARED_BUFFER=y: no dma-buf to share GPU memory")
    if not nvidia_license:
        failed.append("the nvidia kernel module is not installed for this kernel (modinfo nvidia): install the driver "
                      "with the open kernel modules first")
    elif nvidia_license.strip() != OPEN_LICENSE:
        failed.append(f"the nvidia kernel module is the proprietary one (license {nvidia_license.strip()!r}): dma-buf "
                      "export needs the open kernel modules (nvidia-kernel-open-dkms, -open packages)")
    return Verdict(tuple(failed), tuple(unknown))


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]

    module = AnsibleModule(argument_spec={"kernel": {"type": "str", "required": True},
                                          "kernel_config": {"type": "str", "default": ""},
                                          "nvidia_license": {"type": "str", "default": ""}},
                           supports_check_mode=True)
    result = verdict(module.params["kernel"], module.params["kernel_config"], module.params["nvidia_license"])
    for unknown in result.unknown:
        module.warn(f"dma-buf prerequisite unknown: {unknown}")
    if result.failed:
        module.fail_json(msg="GPUDirect RDMA over dma-buf (inbox RDMA stack, no nvidia-peermem) is not possible: "
                         + "; ".join(result.failed), method="dmabuf", unknown=list(result.unknown))
    module.exit_json(changed=False, method="dmabuf", unknown=list(result.unknown))


if __name__ == "__main__":
    main()
