"""gpudirect_rdma's registration check (library/gpudirect_rdma_registered.py): nv_mem present, not modprobe.

The test hosts are chroots sharing the controller's kernel (no OFED, no GPU): the verdict is tested here.
"""

from __future__ import annotations

from tests.ansible.role_library import load

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
