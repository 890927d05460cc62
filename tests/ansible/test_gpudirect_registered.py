"""gpudirect_rdma's registration check (library/gpudirect_rdma_registered.py): nv_mem present, not modprobe.

The test hosts are chroots sharing the controller's kernel (no OFED, no GPU): the verdicts are tested here, the
peer-memory registration (DOCA-OFED / MLNX_OFED) and the dma-buf prerequisites (inbox rdma-core,
library/gpudirect_rdma_dmabuf.py).
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

from tests.ansible.role_library import REPO, load

reg = load("gpudirect_rdma", "gpudirect_rdma_registered")


def test_a_registered_nv_mem_passes() -> None:
    assert reg.verdict(True, True, "6.8.0-49-generic") is None


def test_a_loaded_module_without_nv_mem_fails_with_the_rebuild_to_do() -> None:
    message = reg.verdict(False, True, "6.8.0-49-generic")
    assert message is not None
    assert message.startswith("nvidia-peermem loaded but did not register (/sys/kernel/mm/memory_peers/nv_mem")
    assert "dkms autoinstall -k 6.8.0-49-generic" in message and "no nv_mem client" in message
    no_api = reg.verdict(False, False, "6.8.0-49-generic")
    assert no_api is not None and "no peer-memory API" in no_api


def _load_dmabuf() -> Any:
    """The dma-buf module, registered in sys.modules first (its frozen dataclass looks its module up there)."""
    path = REPO / "roles/gpudirect_rdma/library/gpudirect_rdma_dmabuf.py"
    spec = importlib.util.spec_from_file_location("gpudirect_rdma_dmabuf", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


dmabuf = _load_dmabuf()
CONFIG = "CONFIG_DMA_SHARED_BUFFER=y\n"


def test_an_inbox_stack_with_a_new_kernel_and_the_open_module_passes_the_dma_buf_check() -> None:
    assert dmabuf.verdict("6.1.0-28-amd64", CONFIG, "Dual MIT/GPL") == dmabuf.Verdict((), ())


def test_an_old_kernel_or_the_proprietary_module_fails_the_dma_buf_check_with_the_fix() -> None:
    old = dmabuf.verdict("5.10.0-32-amd64", CONFIG, "Dual MIT/GPL")
    assert len(old.failed) == 1 and "older than 5.12" in old.failed[0] and "ofed_source" in old.failed[0]
    proprietary = dmabuf.verdict("6.8.0-49-generic", CONFIG, "NVIDIA")
    assert "proprietary" in proprietary.failed[0] and "open kernel modules" in proprietary.failed[0]
    missing = dmabuf.verdict("6.8.0-49-generic", "# CONFIG_DMA_SHARED_BUFFER is not set\n", "")
    assert len(missing.failed) == 2 and "CONFIG_DMA_SHARED_BUFFER" in missing.failed[0]


def test_an_unreadable_kernel_config_is_unknown_not_failed() -> None:
    # A chroot test host has no /boot/config-<kernel> of its own: unknown, reported as a warning, not a failure.
    result = dmabuf.verdict("6.8.0-49-generic", "", "Dual MIT/GPL")
    assert result.failed == () and len(result.unknown) == 1 and "/boot/config-6.8.0-49-generic" in result.unknown[0]
    assert dmabuf.verdict("weird", CONFIG, "Dual MIT/GPL").unknown
