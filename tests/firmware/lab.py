"""A small site with a firmware baseline, served by the Redfish simulator in this test's own event loop."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml

from provision.site import Site, load_site
from sim.addresses import bmc_address, free_port
from sim.redfish.bmc import Settings
from sim.redfish.firmware import SimFirmware
from sim.redfish.server import Simulator
from tests.redfish.simlab import PASSWORD_VAR

BASELINE: dict[str, Any] = {
    "components": [{"kind": "bios", "version": "1.15.0"}, {"kind": "bmc", "min_version": "7.10.30.00"},
                   {"kind": "hca", "version": "28.43.1014"}],
    "bios": {"SysProfile": "PerfOptimized", "ProcCStates": "Disabled", "SriovGlobalEnable": "Enabled"},
}


def write_site(directory: Path, hosts: int, *, racks: int = 1, sim: dict[str, Any] | None = None,
               rollout: dict[str, Any] | None = None, baseline: dict[str, Any] | None = None) -> Path:
    port = free_port()
    per_rack = (hosts + racks - 1) // racks
    spec: dict[str, Any] = {
        "name": "fw", "bmc_tls": {"verify": False},
        "credentials": {"bmc": {"username": "root", "password": {"env": PASSWORD_VAR}}},
        "host_classes": {"gpu": {"gpu": {"model": "NVIDIA H200", "count": 2},
                                 "ib": {"hca_count": 2, "link_speed": "NDR"}, "pxe_nic": "NIC.Integrated.1-1-1",
                                 "firmware": baseline if baseline is not None else BASELINE}},
        "firmware_rollout": {"poll_s": 0.05, "task_timeout_s": 5, "bmc_return_timeout_s": 5, "reboot_timeout_s": 5,
                             **(rollout or {})},
        "racks": [{"name": f"r{r}", "hosts": [
            {"hostname": f"h{i:02d}", "u": i % per_rack + 1, "role": "gpu", "class": "gpu",
             "bmc": {"address": bmc_address(i), "port": port, "credential": "bmc"}}
            for i in range(r * per_rack, min(hosts, (r + 1) * per_rack))]} for r in range(racks)],
    }
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "site.yml").write_text(yaml.safe_dump(spec, sort_keys=False))
    if sim is not None:
        (directory / "firmware-sim.yml").write_text(yaml.safe_dump(sim))
    return directory / "site.yml"


@contextlib.asynccontextmanager
async def serving(site: Site, cert_dir: Path, *, task_s: float = 0.2, bmc_reboot_s: float = 0.3
                  ) -> AsyncIterator[Simulator]:
    sim = Simulator(site, Settings(power_delay_s=0.05), {}, cert_dir, None)
    for bmc in sim.bmcs.values():
        assert bmc.firmware is not None
        bmc.firmware.task_s = task_s
        bmc.firmware.bmc_reboot_s = bmc_reboot_s
    await sim.start()
    try:
        yield sim
    finally:
        await sim.stop()


def firmware_of(sim: Simulator, host: str) -> SimFirmware:
    found = sim.bmcs[host].firmware
    assert found is not None
    return found


def load(path: Path) -> Site:
    return load_site(path)


def image(directory: Path, kind: str, version: str, *, content: bytes | None = None) -> dict[str, str]:
    """A stand-in image (sim/redfish/firmware_config.py's format) under the site folder, and its pin."""
    import hashlib

    body = content if content is not None else f"BRINGUP-SIM-FIRMWARE kind={kind} version={version}\n".encode()
    path = directory / "images" / f"{kind}-{version}.bin"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    return {"file": f"images/{path.name}", "sha256": hashlib.sha256(body).hexdigest()}


def baseline_with_images(directory: Path) -> dict[str, Any]:
    return {
        "components": [{"kind": "bios", "version": "1.15.0", "image": image(directory, "bios", "1.15.0")},
                       {"kind": "bmc", "min_version": "7.10.30.00", "image": image(directory, "bmc", "7.10.30.00")},
                       {"kind": "hca", "version": "28.43.1014", "image": image(directory, "hca", "28.43.1014")}],
        "bios": dict(BASELINE["bios"]),
    }


def image_rollout(**extra: Any) -> dict[str, Any]:
    return {"image_url": f"http://127.0.0.1:{free_port()}/", **extra}
