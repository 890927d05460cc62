"""A virtual environment shaped like the training one (dist-info of torch with its CUDA, NCCL, DeepSpeed; a
script whose shebang names the prefix; a binary; the interpreter symlink), packed by pack-env, and the
SSH host simulator (sim/sshhosts) for the fan-out. The lab's sessions are text, so copies travel base64."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from sim.sshhosts.harness import REPLAY_ROOT, replayed_machine
from sim.sshhosts.sitegen import write_site
from training.pack_env import pack

# Host-to-host copy in the lab: the source host's OpenSSH client into the target's simulated endpoint.
LAB_PUSH = ("base64 {src} | ssh -q -i {key_file} -o UserKnownHostsFile={known_hosts} -o BatchMode=yes "
            "-o StrictHostKeyChecking=yes -p {port} {user}@{address} "
            "'mkdir -p {dir} && base64 -d > {dst}.part && mv {dst}.part {dst}'")


def make_venv(root: Path, payload_bytes: int = 200_000) -> Path:
    venv = root / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    (site / "torch").mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.7\n")
    for dist in ("torch-2.13.0+cu128", "deepspeed-0.19.8", "nvidia_nccl_cu12-2.27.3"):
        (site / f"{dist}.dist-info").mkdir()
        (site / f"{dist}.dist-info" / "METADATA").write_text(f"Name: {dist.split('-')[0]}\n")
    (site / "torch" / "version.py").write_text("__version__ = '2.13.0+cu128'\ncuda: Optional[str] = '12.8'\n")
    (site / "torch" / "_C.so").write_bytes(os.urandom(payload_bytes))
    (site / "torch" / "__pycache__").mkdir()
    (site / "torch" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"cache")
    (venv / "bin" / "torchrun").write_text(f"#!{venv}/bin/python\nimport sys\n")
    (venv / "bin" / "python").symlink_to("/usr/bin/python3")
    return venv


@pytest.fixture(scope="session")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("env")
    pack(make_venv(root), root / "out")
    return root / "out"


def lab_site(directory: Path, count: int, hosts: dict[str, dict[str, str]] | None = None) -> tuple[Path, Path]:
    class_spec, _ = replayed_machine()
    site_file = write_site(directory, count, class_spec=class_spec, host_class="h200x2", name="shiptest",
                           policy={"golden_requires_burn_in": False})
    faults = directory / "health-faults.yml"
    faults.write_text(yaml.safe_dump({"fixture_root": str(REPLAY_ROOT), "default_fixture": "h200x2-ib-healthy",
                                      "hosts": hosts or {}}))
    return site_file, faults
