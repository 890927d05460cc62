"""Test helpers: a generated site on loopback BMC addresses and the simulator as a child process."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from sim.addresses import bmc_address, free_port

REPO = Path(__file__).resolve().parents[2]
PASSWORD_VAR = "BRINGUP_TEST_BMC_PASSWORD"
CONTROL_ADDRESS = "127.0.2.10"


def new_password() -> str:
    return "pw-" + secrets.token_urlsafe(12)


def write_site(directory: Path, hosts: int, port: int, *, tls: str = "verify: false", gpus: int = 2, hcas: int = 2,
               name: str = "t", policy: str = "") -> Path:
    lines = [
        f"name: {name}",
        "bmc_tls: {" + tls + "}",
        "policy: {" + policy + "}",
        "credentials:",
        f"  bmc: {{username: root, password: {{env: {PASSWORD_VAR}}}}}",
        "host_classes:",
        "  gpu:",
        f"    gpu: {{model: NVIDIA H100 80GB HBM3, count: {gpus}}}",
        f"    ib: {{hca_count: {hcas}, link_speed: NDR}}",
        "    pxe_nic: NIC.Integrated.1-1-1",
        "racks:",
    ]
    per_rack = 32
    for r in range((hosts + per_rack - 1) // per_rack):
        lines += [f"  - name: r{r:02d}", "    hosts:"]
        for i in range(r * per_rack, min(hosts, (r + 1) * per_rack)):
            lines.append(f"      - {{hostname: h{i:03d}, u: {i % per_rack + 1}, role: gpu, class: gpu, "
                         f"bmc: {{address: {bmc_address(i)}, port: {port}, credential: bmc}}}}")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "site.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


class SimProcess:
    """`python -m sim.redfish` for a site; the password travels in the environment only."""

    def __init__(self, site: Path, password: str, run_dir: Path, *, latency_ms: float = 0, power_delay_ms: float = 100,
                 slow_ms: float = 300, faults: Path | None = None, cert_key: str = "ecdsa") -> None:
        self.control_port = free_port(CONTROL_ADDRESS)
        self.cert_dir = run_dir / "certs"
        argv = [sys.executable, "-m", "sim.redfish", "--site", str(site), "--cert-dir", str(self.cert_dir),
                "--control", f"{CONTROL_ADDRESS}:{self.control_port}", "--latency-ms", str(latency_ms),
                "--power-delay-ms", str(power_delay_ms), "--slow-ms", str(slow_ms), "--cert-key", cert_key]
        if faults is not None:
            argv += ["--faults", str(faults)]
        self.log = run_dir / "sim.log"
        run_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, PASSWORD_VAR: password, "PYTHONUNBUFFERED": "1"}
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"simulator exited: {self.log.read_text()}")
            try:
                with socket.create_connection((CONTROL_ADDRESS, self.control_port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("simulator did not start")

    @property
    def ca(self) -> Path:
        return self.cert_dir / "ca.pem"

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://{CONTROL_ADDRESS}:{self.control_port}{path}", data=data, method=method)
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def hosts(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/hosts")
        return result

    def set_faults(self, faults: dict[str, list[str]]) -> None:
        self._call("PUT", "/faults", faults)

    def repair(self) -> None:
        self._call("POST", "/repair", {})

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
