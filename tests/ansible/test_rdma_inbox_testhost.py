"""A Debian 12 test host whose site names the inbox RDMA stack (host class versions.ofed_source: inbox): the ofed
role installs Debian's rdma-core, and gpudirect_rdma takes the dma-buf path (no nvidia-peermem: the upstream RDMA
stack has no peer-memory API) and checks its prerequisites for real on the host: the running kernel's release
(the controller's: a chroot shares its kernel) and the nvidia module's license from modinfo (the open-module
stand-in says Dual MIT/GPL, as nvidia-kernel-open-dkms does). A chroot has no /boot/config-<kernel> of its own, so
CONFIG_DMA_SHARED_BUFFER is "unknown" there (a warning, unit-tested in test_gpudirect_registered.py), not checked.

One host of its own (127.0.1.121), two playbook runs (configure, then changed=0): about 40 s on this machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.testhosts.proc import run
from sim.testhosts.standins import DRIVER_VERSIONS, RDMA_CORE_VERSION
from tests.ansible.conftest import run_playbook, start_own_test_hosts

pytestmark = pytest.mark.slow

ADDRESS_OFFSET = 120
HOST = "gpu-r1-01"
PLAY = """---
- name: The RDMA stack and GPUDirect RDMA, as site.yml applies them
  hosts: role_gpu:&configurable
  gather_facts: false
  vars:
    host_state_unit_patterns: [openibd.service, nvidia-peermem.service]
  pre_tasks:
    - name: Gather the facts the roles use (distribution, kernel)
      ansible.builtin.setup:
        gather_subset: ['!all', '!min', distribution, platform]
  roles:
    - ofed
    - gpudirect_rdma
"""


@pytest.fixture(scope="module")
def inbox_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from sim.testhosts import lab as lab_mod

    run_dir = tmp_path_factory.mktemp("rdma-inbox")
    started: Any = start_own_test_hosts(run_dir, 1, ADDRESS_OFFSET)
    try:
        doc = yaml.safe_load(started.site_file.read_text())
        for cls in doc["host_classes"].values():
            versions = {k: v for k, v in cls["versions"].items() if k not in ("doca_ofed", "ofed")}
            cls["versions"] = {**versions, "ofed_source": "inbox"}
        started.site_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        # The driver's open kernel modules, installed by hand (the nvidia_driver role is not this test's subject).
        root = started.host(HOST).root
        source = root / "etc/apt/sources.list.d/cuda-standin.sources"
        source.write_text(f"Types: deb\nURIs: {started.repo_url}/cuda/\nSuites: ./\n"
                          "Signed-By: /etc/apt/keyrings/bringup-testhost-distro.asc\n")
        try:
            run(["chroot", str(root), "apt-get", "-q", "update"], timeout=300)
            run(["chroot", str(root), "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q",
                 f"nvidia-kernel-open-dkms={DRIVER_VERSIONS[0]}-1"], timeout=300)
        finally:
            source.unlink()
        yield started
    finally:
        assert lab_mod.down(run_dir) == []


def test_an_inbox_rdma_stack_gets_rdma_core_and_the_dma_buf_path_not_nvidia_peermem(inbox_host: Any,
                                                                                     tmp_path: Path) -> None:
    playbook = tmp_path / "rdma_inbox.yml"
    playbook.write_text(PLAY)
    first = run_playbook(inbox_host.inventory, playbook, timeout=300)
    assert first.rc == 0, first.output[-4000:]
    root = inbox_host.host(HOST).root
    installed = run(["chroot", str(root), "dpkg-query", "-W", "-f", "${Package} ${Version}\n", "rdma-core"])
    assert installed.strip() == f"rdma-core {RDMA_CORE_VERSION}"
    assert not (root / "etc/systemd/system/nvidia-peermem.service").exists()
    assert "TASK [gpudirect_rdma : Check the dma-buf prerequisites" in first.output
    assert "TASK [gpudirect_rdma : Look up the peer-memory module" not in first.output
    # the chroot's missing kernel config is reported as unknown, not failed
    assert "dma-buf prerequisite unknown" in " ".join(first.output.split())
    second = run_playbook(inbox_host.inventory, playbook, timeout=300)
    assert second.rc == 0 and second.recap[HOST]["changed"] == 0, second.output[-4000:]
