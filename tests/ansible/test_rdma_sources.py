"""The RDMA stack's source is a site fact (host class versions.ofed_source), validated at load, that the ofed and
gpudirect_rdma roles follow (the apt cache's remapping of the repository is vendor_repo's: test_vendor_repo_cache.py).

The role defaults are rendered by Ansible itself in a child process (`ansible localhost -m debug`, about 3 s): the
pytest process does not import Ansible (it patches sys.intern, which torch.compile on the same worker refuses).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from provision.site.versions import Versions

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_the_rdma_source_is_a_validated_site_fact() -> None:
    assert Versions().ofed_source is None  # the roles' default: doca
    assert Versions(ofed_source="mlnx", ofed="24.10-1.1.4.0").ofed_source == "mlnx"
    assert Versions(ofed_source="inbox").ofed is None
    for bad, said in (({"ofed_source": "ofed"}, "ofed_source"),
                      ({"ofed_source": "mlnx", "ofed": "24.10-1.1.4"}, "4 parts"),
                      ({"ofed_source": "inbox", "doca_ofed": "2.9.1"}, "drop doca_ofed/ofed")):
        with pytest.raises(ValidationError, match=said):
            Versions(**bad)


def _render(names: list[str], variables: dict[str, Any]) -> dict[str, Any]:
    """The named variables as Ansible renders them from the ofed and gpudirect_rdma defaults and `variables`."""
    facts = {"ansible_facts": {"distribution": "Debian", "distribution_major_version": "12", "kernel": "6.1.0-28-amd64"}}
    expression = "{{ {" + ", ".join(f"'{n}': {n}" for n in names) + "} | to_json }}"
    done = subprocess.run(
        [str(BIN / "ansible"), "localhost", "-i", "localhost,", "-c", "local", "-o", "-m", "ansible.builtin.debug",
         "-a", f"msg={expression}", "-e", f"@{REPO / 'roles/ofed/defaults/main.yml'}",
         "-e", f"@{REPO / 'roles/ofed/vars/main.yml'}", "-e", f"@{REPO / 'roles/gpudirect_rdma/defaults/main.yml'}",
         "-e", json.dumps({**facts, **variables})],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
             "ANSIBLE_GATHERING": "explicit"}, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    payload = done.stdout.split("=>", 1)[1].strip()
    msg = json.loads(payload)["msg"]
    return dict(json.loads(msg) if isinstance(msg, str) else msg)


def test_the_roles_follow_the_site_s_rdma_source() -> None:
    names = ["ofed_source", "ofed_repo_url", "gpudirect_rdma_method"]
    doca = _render(names, {"bringup_versions": {"doca_ofed": "2.9.1", "ofed": "24.10-1.1.4.0"}})
    assert doca == {"ofed_source": "doca", "gpudirect_rdma_method": "peermem",
                    "ofed_repo_url": "https://linux.mellanox.com/public/repo/doca/2.9.1/debian12.5/x86_64/"}
    mlnx = _render(names, {"bringup_versions": {"ofed_source": "mlnx", "ofed": "24.10-1.1.4.0"},
                           "bringup_rollout": {"apt_proxy": "http://ctl-01:3142"}})
    assert mlnx == {"ofed_source": "mlnx", "gpudirect_rdma_method": "peermem",
                    "ofed_repo_url": "https://linux.mellanox.com/public/repo/mlnx_ofed/24.10-1.1.4.0/"
                                     "debian12.5/x86_64/"}
    inbox = _render(names[::2], {"bringup_versions": {"ofed_source": "inbox"}})
    assert inbox == {"ofed_source": "inbox", "gpudirect_rdma_method": "dmabuf"}
