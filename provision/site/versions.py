"""Host class `versions`: what the hosts must run, and where the GPU driver stack comes from.

The Ansible roles read these through the inventory (`bringup_versions`): the driver's package names and
version strings follow `gpu_driver_source` (roles/nvidia_driver/README.md cites each source's packaging);
DCGM, dcgm-exporter, the container toolkit, Docker and DOCA-OFED are installed at exactly these versions,
with the version strings their repositories publish (each role's README cites the page). The MLNX_OFED
version (`ofed`) follows from the DOCA-OFED release as NVIDIA's DOCA release notes map them.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# DOCA-Host release -> the MLNX_OFED release its DOCA-OFED profile carries. 2.9.0, 2.9.3 and 2.10.0: NVIDIA's
# driver-container manifests (github.com/Mellanox/doca-driver-build release_manifests/24.10.yaml, 24.10-LTS25.07.yaml,
# 25.01.yaml: doca_version beside driver_version); 2.9.1: the same repository's Dockerfile (D_DOCA_VERSION 2.9.1,
# D_OFED_VERSION 24.10-1.1.4.0) and the DOCA 2.9.1 repository's SOURCES/MLNX_OFED/MLNX_OFED_SRC-debian-24.10-1.1.4.0;
# 2.9.2 inferred from its release notes' components (https://docs.nvidia.com/doca/archive/2-9-2/Changes+and+New+Features:
# fwctl-modules 24.10.OFED.24.10.2.1.8.1), no manifest found. The 4-part form is the one MLNX_OFED's download paths
# use (linux.mellanox.com/public/repo/mlnx_ofed/24.10-1.1.4.0/...).
DOCA_MLNX_OFED: dict[str, str] = {
    "2.9.0": "24.10-0.7.0.0",
    "2.9.1": "24.10-1.1.4.0",
    "2.9.2": "24.10-2.1.8.0",
    "2.9.3": "24.10-3.2.5.0",
    "2.10.0": "25.01-0.6.0.0",
}
_OFED = re.compile(r"^\d+\.\d+-\d+\.\d+\.\d+(\.\d+)?$")
_UPSTREAM = r"^\d+(\.\d+)+$"
_MLNX4 = re.compile(r"^\d+\.\d+-\d+\.\d+\.\d+\.\d+$")


def ofed_info_form(mlnx_ofed: str) -> str:
    """The part of an MLNX_OFED version that `ofed_info -s` prints for DOCA-OFED too (24.10-1.1.4)."""
    return re.sub(r"^(\d+\.\d+-\d+\.\d+\.\d+)\.\d+$", r"\1", mlnx_ofed)


class Versions(BaseModel):
    """Versions the hosts must run; empty means "not checked" (or, for a package, the role's own pin)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu_driver: str | None = None
    gpu_driver_source: Literal["cuda", "ubuntu"] = Field(
        default="cuda",
        description="cuda: NVIDIA's CUDA repository (ubuntu2204, ubuntu2404, debian12; names like "
        "nvidia-driver-580-open, Debian's nvidia-driver-cuda); ubuntu: Canonical's signed -server packages from "
        "the Ubuntu archive (nvidia-driver-580-server-open), Ubuntu only.",
    )
    cuda: str | None = Field(default=None, description="CUDA major.minor; its major picks DCGM's -cudaN package")
    vbios: str | None = None
    hca_firmware: str | None = None
    bios: str | None = None
    bmc_firmware: str | None = None
    ofed: str | None = Field(
        default=None, description="MLNX_OFED version, 4 parts as its download paths (24.10-1.1.4.0); derived from "
        "doca_ofed when that is set")
    doca_ofed: str | None = Field(default=None, pattern=_UPSTREAM, description="DOCA-Host release (2.9.1)")
    ofed_source: Literal["doca", "mlnx", "inbox"] | None = Field(
        default=None,
        description="the RDMA stack (none: doca): doca = DOCA-OFED from NVIDIA's DOCA repository (doca_ofed); "
        "mlnx = MLNX_OFED from its repository (ofed, 4 parts); inbox = the distribution's rdma-core "
        "(Debian 12's, Ubuntu's), whose "
        "upstream RDMA stack has no peer-memory API: GPUDirect RDMA then goes through dma-buf, not nvidia-peermem "
        "(roles/gpudirect_rdma)",
    )
    dcgm: str | None = Field(default=None, pattern=_UPSTREAM, description="DCGM 4 upstream version (4.4.1)")
    dcgm_exporter: str | None = Field(default=None, pattern=_UPSTREAM,
                                      description="dcgm-exporter's own version (4.4.1 of 4.4.1-4.4.1)")
    container_toolkit: str | None = Field(default=None, pattern=_UPSTREAM, description="NVIDIA container toolkit")
    docker: str | None = Field(default=None, pattern=_UPSTREAM, description="docker-ce upstream version (28.3.3)")
    containerd: str | None = Field(default=None, pattern=_UPSTREAM, description="containerd.io upstream (1.7.27)")

    @model_validator(mode="before")
    @classmethod
    def _ofed_from_doca(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not data.get("doca_ofed"):
            return data
        doca = str(data["doca_ofed"])
        mapped = DOCA_MLNX_OFED.get(doca)
        given = data.get("ofed")
        if mapped is None:
            if given is None:
                known = ", ".join(f"{d} -> {m}" for d, m in DOCA_MLNX_OFED.items())
                raise ValueError(f"doca_ofed {doca} has no known MLNX_OFED release ({known}): set ofed as well")
            return data
        if given is not None and ofed_info_form(str(given)) != ofed_info_form(mapped):
            raise ValueError(f"ofed {given} is not the MLNX_OFED of DOCA {doca} ({mapped}, per NVIDIA's DOCA "
                             "release notes): drop ofed or fix one of them")
        return {**data, "ofed": mapped}

    @model_validator(mode="after")
    def _ofed_form(self) -> Versions:
        if self.ofed is not None and not _OFED.match(self.ofed):
            raise ValueError(f"ofed {self.ofed!r} is not an MLNX_OFED version like 24.10-1.1.4.0")
        if self.ofed_source == "mlnx" and self.ofed is not None and not _MLNX4.match(self.ofed):
            raise ValueError(f"ofed_source mlnx needs ofed in the 4 parts of MLNX_OFED's download paths "
                             f"(24.10-1.1.4.0), not {self.ofed!r}")
        if self.ofed_source == "inbox" and (self.doca_ofed or self.ofed):
            raise ValueError("ofed_source inbox installs the distribution's rdma-core: drop doca_ofed/ofed, "
                             "or pick ofed_source doca or mlnx")
        return self
