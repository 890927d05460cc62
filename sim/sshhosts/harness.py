"""Start the SSH host simulator for a test or a benchmark, under the lab's process manager, and stop it.

    with SshLab(site_file, faults_file, run_dir) as lab:
        settings = SshSettings.from_site(site, lab.env)   # or os.environ.update(lab.env) for the CLI
"""

from __future__ import annotations

import json
import random
import socket
from pathlib import Path
from types import TracebackType
from typing import Any

from provision.ssh import ENV_ADDRESS_MAP, ENV_KEY_FILE, ENV_KNOWN_HOSTS
from sim.lab import Lab, Service, python_module
from sim.sshhosts.addresses import ssh_host_address
from sim.sshhosts.server import Files
from sim.sshhosts.service import ready_probe

REPO_ROOT = Path(__file__).resolve().parents[2]
REPLAY_ROOT = REPO_ROOT / "tests" / "fixtures" / "tools" / "replay"


def free_port(address: str = ssh_host_address(0)) -> int:
    """A port that is free on `address` (each simulated host listens on the same port of its own address)."""
    for _ in range(50):
        port = random.randint(20000, 60000)
        with socket.socket() as probe:
            try:
                probe.bind((address, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port found on {address}")


class SshLab:
    def __init__(
        self,
        site: Path,
        faults: Path,
        run_dir: Path,
        *,
        port: int | None = None,
        agent_mode: str = "fork",
        start_timeout_s: float = 120.0,
    ) -> None:
        self.run_dir = run_dir
        self.files = Files(run_dir / "sshhosts")
        self.port = port or free_port()
        argv = python_module(
            "sim.sshhosts", "--site", str(site), "--run-dir", str(run_dir), "--faults", str(faults),
            "--port", str(self.port), "--agent-mode", agent_mode,
        )
        pidfile = run_dir / "sshhosts.pid"
        files = self.files
        service = Service("sshhosts", argv, lambda: ready_probe(files, pidfile), start_timeout_s=start_timeout_s,
                          cwd=REPO_ROOT)
        self.lab = Lab([service], run_dir)

    @property
    def env(self) -> dict[str, str]:
        return {
            ENV_KEY_FILE: str(self.files.client_key),
            ENV_KNOWN_HOSTS: str(self.files.known_hosts),
            ENV_ADDRESS_MAP: str(self.files.address_map),
        }

    def __enter__(self) -> SshLab:
        self.lab.up()
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.lab.down()


def replayed_machine(replay_root: Path = REPLAY_ROOT) -> tuple[dict[str, Any], dict[str, Any]]:
    """(host class spec, health-expectations overlay) describing the machine the `-ib` replay sets capture.

    Read from the agent's own example expectations beside the fixtures, so a site generated with them
    expects exactly the hardware the replayed outputs show.
    """
    exp = json.loads((replay_root / "expectations-h200x2-ib.json").read_text(encoding="utf-8"))
    gpu, ib = exp["gpu"], exp["ib"]
    rate_per_lane = {50: "HDR", 100: "NDR", 200: "XDR", 25: "EDR"}[int(ib["rate_gbps"]) // int(ib["width"][:-1])]
    class_spec: dict[str, Any] = {
        "description": "the machine the h200x2 -ib replay sets were captured from",
        "gpu": {"model": gpu["model"], "count": gpu["count"]},
        "ib": {"hca_count": ib["hca_count"], "link_speed": rate_per_lane, "link_width": ib["width"]},
        "pcie": {"gpu_gen": gpu["pcie_gen"], "gpu_width": gpu["pcie_width"], "hca_gen": ib["pcie_gen"],
                 "hca_width": ib["pcie_width"]},
        "versions": {"gpu_driver": gpu["driver_version"], "cuda": gpu["cuda_version"],
                     "vbios": gpu["vbios_versions"][0], "hca_firmware": ib["firmware"][0]},
        "floors": {"matmul_tflops": exp["long"]["stress_tflops_floor"],
                   "allreduce_busbw_gbps": exp["long"]["allreduce_busbw_floor_gbps"]},
    }
    overlay = {
        "gpu": {"nvlinks_per_gpu": gpu["nvlinks_per_gpu"]},
        "kernel_log": exp.get("kernel_log", {}),
        "system": exp.get("system", {}),
        "long": {"membw_floor_gbps": exp["long"]["membw_floor_gbps"]},
    }
    return class_spec, overlay
