"""roles/hca_firmware on a Debian test host with the stand-in mlxfwmanager (sim/testhosts/payload/mlxfwmanager): a
host whose HCA runs an older FW gets the site's image burnt (checked on the controller and on the host first), a
second run changes nothing, and an image whose SHA-256 is not the pinned one is refused before any host sees it.
The stand-in's query is read by the health agent's parser (tools/health/mlxfw.py) as a real capture is.

One host of its own (127.0.1.131), five playbook runs (one --check): 52 s on this machine before the --check run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ansible.conftest import REPO, run_playbook, start_own_test_hosts
from tools.health.mlxfw import parse_query

pytestmark = pytest.mark.slow

ADDRESS_OFFSET = 130
HOST = "gpu-r1-01"
STANDIN = REPO / "sim" / "testhosts" / "payload" / "mlxfwmanager"
PLAY = """---
- name: HCA firmware, as the site applies it
  hosts: role_gpu:&configurable
  gather_facts: false
  roles:
    - hca_firmware
"""
STATE = "var/lib/mft-standin/devices.json"


def image(directory: Path, version: str, psid: str = "MT_0000000838") -> tuple[Path, str]:
    path = directory / f"fw-ConnectX7-{version}.bin"
    path.write_text(f"BRINGUP-SIM-FIRMWARE kind=hca version={version} psid={psid}\n")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def fw_on(root: Path) -> list[str]:
    return [d["fw"] for d in json.loads((root / STATE).read_text())]


@pytest.fixture(scope="module")
def fw_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from sim.testhosts import lab as lab_mod

    run_dir = tmp_path_factory.mktemp("hca-fw")
    started: Any = start_own_test_hosts(run_dir, 1, ADDRESS_OFFSET)
    try:
        root = started.host(HOST).root
        shutil.copy(STANDIN, root / "usr/bin/mlxfwmanager")
        (root / "usr/bin/mlxfwmanager").chmod(0o755)
        yield started
    finally:
        assert lab_mod.down(run_dir) == []


def run(lab: Any, play: Path, image_path: Path, sha: str, version: str, *options: str) -> Any:
    extra = {"hca_firmware_image": str(image_path), "hca_firmware_image_sha256": sha,
             "hca_firmware_version": version, "hca_firmware_packages": []}
    return run_playbook(lab.inventory, play, "-e", json.dumps(extra), *options, timeout=300)


def test_the_role_burns_the_sites_image_once_and_refuses_a_wrong_checksum(fw_host: Any, tmp_path: Path) -> None:
    play = tmp_path / "hca_firmware.yml"
    play.write_text(PLAY)
    root = fw_host.host(HOST).root
    new, sha = image(tmp_path, "28.43.1014")
    bad = run(fw_host, play, new, "0" * 64, "28.43.1014")
    said = " ".join(bad.output.split())  # the callback wraps long messages
    assert bad.rc != 0 and "is not the pinned" in said and "no host was given it" in said
    assert not (root / STATE).exists()  # nothing burnt: the stand-in's devices still as shipped
    # --check reads the HCAs and says it would copy and burn, and does neither
    check = run(fw_host, play, new, sha, "28.43.1014", "--check")
    assert check.rc == 0 and check.recap[HOST]["changed"] >= 2, check.output[-4000:]
    assert not (root / STATE).exists() and not (root / "var/lib/bringup/hca-firmware" / new.name).exists()
    first = run(fw_host, play, new, sha, "28.43.1014")
    assert first.rc == 0, first.output[-4000:]
    assert first.recap[HOST]["changed"] >= 2 and fw_on(root) == ["28.43.1014"]
    assert (root / "var/lib/bringup/hca-firmware" / new.name).read_bytes() == new.read_bytes()
    again = run(fw_host, play, new, sha, "28.43.1014")
    assert again.rc == 0 and again.recap[HOST]["changed"] == 0, again.output[-4000:]
    other, other_sha = image(tmp_path, "28.44.1000", psid="MT_0000000999")  # an image for other cards
    wrong = run(fw_host, play, other, other_sha, "28.44.1000")
    assert wrong.rc != 0 and fw_on(root) == ["28.43.1014"]


def test_the_standin_query_reads_as_the_real_tool_prints_it(tmp_path: Path) -> None:
    env = {**os.environ, "MFT_STANDIN_STATE": str(tmp_path / "devices.json")}
    out = subprocess.run([str(STANDIN), "--query"], capture_output=True, text=True, env=env, check=True).stdout
    devices = parse_query(out)
    assert [(d.fields["PSID"], d.firmware, d.status) for d in devices] == [
        ("MT_0000000838", "28.39.1002", "No matching image found")]
