"""pack-env: versions read from the venv's metadata, caches left out, checksums, and the archive unpacked and
relocated elsewhere by the same shell the hosts run (provision/ship/fanout.verify_command)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
from pathlib import Path

from provision.ship.fanout import ShipConfig, verify_command
from tests.ship.conftest import make_venv
from training.pack_env import MANIFEST, SUMMARY, main, pack


def test_the_manifest_names_the_versions_every_host_must_match_and_every_files_checksum(tmp_path: Path) -> None:
    venv = make_venv(tmp_path)
    man = pack(venv, tmp_path / "out")
    assert man["versions"] == {"python": "3.11.7", "torch": "2.13.0+cu128", "cuda": "12.8", "nccl": "2.27.3",
                               "deepspeed": "0.19.8", "triton": None}
    files = man["files"]
    assert isinstance(files, dict) and not any("__pycache__" in f for f in files)
    assert files["bin/python"] == "link:/usr/bin/python3"
    blob = (venv / "lib/python3.11/site-packages/torch/_C.so").read_bytes()
    assert files["lib/python3.11/site-packages/torch/_C.so"] == hashlib.sha256(blob).hexdigest()
    archive = tmp_path / "out" / "bringup-env.tar.gz"
    assert man["archive_sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    with tarfile.open(archive) as tar:
        assert json.loads(tar.extractfile(SUMMARY).read())["env_id"] == man["env_id"]  # type: ignore[union-attr]
        assert MANIFEST in tar.getnames()
    assert pack(venv, tmp_path / "again")["env_id"] == man["env_id"]  # same tree, same id
    (venv / "lib/python3.11/site-packages/torch/version.py").write_text("cuda = '12.9'\n")
    assert pack(venv, tmp_path / "changed")["env_id"] != man["env_id"]


def test_unpacked_elsewhere_the_scripts_name_the_new_prefix_and_every_file_checks(tmp_path: Path) -> None:
    venv = make_venv(tmp_path)
    man = pack(venv, tmp_path / "out")
    host = tmp_path / "host"
    host.mkdir()
    (host / "bringup-env.tar.gz").write_bytes((tmp_path / "out" / "bringup-env.tar.gz").read_bytes())
    cmd = verify_command(ShipConfig(dest=str(host), deep=True), "h", str(man["prefix"]))
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=60, check=True)
    assert r.stdout.splitlines()[0] == man["archive_sha256"]
    assert (host / "env" / "bin" / "torchrun").read_text().startswith(f"#!{host}/env/bin/python\n")


def test_pack_env_refuses_a_folder_that_is_no_venv(tmp_path: Path) -> None:
    assert main(["--venv", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
