"""Host class `versions`: what the hosts must run, and where the GPU driver stack comes from.

The Ansible roles read these through the inventory (`bringup_versions`): the driver's package names and
version strings follow `gpu_driver_source` (roles/nvidia_driver/README.md cites each source's packaging).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Versions(BaseModel):
    """Versions the hosts must run; empty means "not checked"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu_driver: str | None = None
    gpu_driver_source: Literal["cuda", "ubuntu"] = Field(
        default="cuda",
        description="cuda: NVIDIA's CUDA repository (ubuntu2204, ubuntu2404, debian12; names like "
        "nvidia-driver-580-open, Debian's nvidia-driver-cuda); ubuntu: Canonical's signed -server packages from "
        "the Ubuntu archive (nvidia-driver-580-server-open), Ubuntu only.",
    )
    cuda: str | None = None
    vbios: str | None = None
    hca_firmware: str | None = None
    bios: str | None = None
    bmc_firmware: str | None = None
    ofed: str | None = None
