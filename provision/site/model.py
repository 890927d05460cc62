"""The site model: what a site file declares, validated once at the edge.

Everything here is frozen: after loading, the rest of the program only reads it.
"""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    HttpUrl,
    field_validator,
    model_validator,
)

from provision.site.endpoints import split_host_port
from provision.site.fabric_diags import FabricDiags
from provision.site.fields import Address, Hostname, Port
from provision.site.firmware import FirmwareBaseline, FirmwareRollout, baseline_versions
from provision.site.paths import SitePaths
from provision.site.port_policy import PortPolicy
from provision.site.rollout import Rollout
from provision.site.slurm import Slurm
from provision.site.switches import ManagementSwitch
from provision.site.versions import Versions

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")




class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Role(StrEnum):
    gpu = "gpu"
    controller = "controller"
    storage = "storage"


class IbSpeed(StrEnum):
    """InfiniBand lane speeds as ibnetdiscover and iblinkinfo print them."""

    SDR = "SDR"
    DDR = "DDR"
    QDR = "QDR"
    FDR10 = "FDR10"
    FDR = "FDR"
    EDR = "EDR"
    HDR = "HDR"
    NDR = "NDR"
    XDR = "XDR"


class CredentialRef(_Model):
    """Where a secret lives. The secret itself never appears in a site file.

    Exactly one of `env` (an environment variable's name) or `vault` + `key` (an ansible-vault YAML
    file, relative to the site file, and the key inside it).
    """

    env: str | None = None
    vault: str | None = None
    key: str | None = None

    @field_validator("env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError("not an environment variable name")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.env is None) == (self.vault is None):
            raise ValueError("give exactly one of 'env' (a variable name) or 'vault' (a file) with 'key'")
        if self.vault is not None and not self.key:
            raise ValueError("'vault' needs 'key': the entry to read from the vault file")
        return self


class Credential(_Model):
    """A user name (not secret) and a reference to its password."""

    username: str = Field(min_length=1)
    password: CredentialRef


class GpuSpec(_Model):
    model: str = Field(min_length=1)
    count: int = Field(ge=0, le=64)


class IbSpec(_Model):
    hca_count: int = Field(ge=0, le=64)
    link_speed: IbSpeed
    link_width: Literal["1X", "2X", "4X", "8X", "12X"] = "4X"
    gpu_for_hca: list[int] | None = Field(
        None, description="the GPU each HCA (mlx5_0, mlx5_1, ...) shares a PCIe switch with, by HCA index "
        "(`nvidia-smi topo -m`: PIX/PXB); GPUDirect burn-in pairs them. Default: spread evenly")

    @model_validator(mode="after")
    def _one_gpu_per_hca(self) -> IbSpec:
        if self.gpu_for_hca is not None and (len(self.gpu_for_hca) != self.hca_count
                                             or any(g < 0 for g in self.gpu_for_hca)):
            raise ValueError(f"gpu_for_hca names one GPU index (>= 0) per HCA: {self.hca_count} expected, "
                             f"got {self.gpu_for_hca}")
        return self


class PcieSpec(_Model):
    gpu_gen: int = Field(ge=1, le=7)
    gpu_width: int = Field(ge=1, le=32)
    hca_gen: int | None = Field(default=None, ge=1, le=7)
    hca_width: int | None = Field(default=None, ge=1, le=32)


class HealthFloors(_Model):
    """Per-class performance floors that the long health checks judge against."""

    matmul_tflops: float | None = Field(
        default=None, gt=0, le=100_000,
        description="Sustained bf16 matmul TFLOP/s every GPU must hold for the whole stress run under its power "
        "limit, not the short-burst peak (an H200 at 700 W sustains 654-666 on normal-distributed inputs, "
        "794-812 only for seconds). The agent also flags a GPU more than 5% below its peers' median.",
    )
    allreduce_busbw_gbps: float | None = Field(default=None, gt=0)
    disk_usage_max_pct: float = Field(default=95.0, gt=0, le=100)


class HostClass(_Model):
    """The hardware every host of one kind is expected to have."""

    description: str = ""
    gpu: GpuSpec | None = None
    ib: IbSpec | None = None
    pcie: PcieSpec | None = None
    nvme_data_disks: int = Field(default=0, ge=0, le=64)
    pxe_nic: str | None = Field(
        default=None, description="FQDD of the NIC that PXE-boots, when the BIOS does not say"
    )
    nvswitch: bool = False
    versions: Versions = Versions()
    firmware: FirmwareBaseline | None = None  # firmware and BIOS baseline (provision/site/firmware.py)
    floors: HealthFloors = HealthFloors()

    def version_facts(self) -> dict[str, Any]:
        """`versions` as the roles and the health agent read them: the firmware baseline's exact HCA and GPU
        versions stand in for hca_firmware and vbios where `versions` pins none (provision/site/firmware.py)."""
        given = {k: v for k, v in self.versions.model_dump(mode="json").items() if v is not None}
        return {**baseline_versions(self.firmware), **given}

    @model_validator(mode="after")
    def _paired_gpus_exist(self) -> HostClass:
        pairs = self.ib.gpu_for_hca if self.ib is not None else None
        if pairs is not None and (self.gpu is None or any(g >= self.gpu.count for g in pairs)):
            gpus = self.gpu.count if self.gpu is not None else 0
            raise ValueError(f"ib.gpu_for_hca names GPU indexes {pairs}, but the class has {gpus} GPU(s)")
        return self


class Bmc(_Model):
    address: Address
    port: Port = 443
    credential: str = Field(min_length=1, description="name of an entry in 'credentials'")


class Host(_Model):
    hostname: Hostname
    u: int = Field(ge=1, le=60, description="lowest rack unit the server occupies")
    role: Role
    host_class: str = Field(alias="class", min_length=1)
    bmc: Bmc
    rack: str = ""  # filled in from the enclosing rack by the site validator

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Rack(_Model):
    name: Hostname
    row: str = ""
    height_u: int = Field(default=48, ge=1, le=60)
    hosts: list[Host] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _hosts_know_their_rack(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("hosts"), list):
            name = data.get("name", "")
            hosts = [
                {**host, "rack": name} if isinstance(host, dict) and "rack" not in host else host
                for host in data["hosts"]
            ]
            return {**data, "hosts": hosts}
        return data


class PxeNetwork(_Model):
    cidr: ipaddress.IPv4Network | ipaddress.IPv6Network
    gateway: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None
    dhcp_range: tuple[ipaddress.IPv4Address, ipaddress.IPv4Address] | None = None
    vlan: int | None = Field(default=None, ge=1, le=4094)

    @model_validator(mode="after")
    def _inside(self) -> Self:
        if self.gateway is not None and self.gateway not in self.cidr:
            raise ValueError(f"gateway {self.gateway} is outside {self.cidr}")
        if self.dhcp_range is not None:
            start, end = self.dhcp_range
            if start not in self.cidr or end not in self.cidr:
                raise ValueError(f"dhcp_range {start}-{end} is not inside {self.cidr}")
            if int(start) > int(end):
                raise ValueError(f"dhcp_range starts after it ends ({start} > {end})")
        return self


class Maas(_Model):
    url: HttpUrl
    api_key: CredentialRef
    distro_series: str = Field("jammy", min_length=1, description="the OS series MAAS deploys (jammy, noble...)")
    architecture: str = Field("amd64/generic", pattern=r"^[a-z0-9_]+/[a-z0-9_.-]+$",
                              description="MAAS architecture of the machines enlisted (arm64/generic for GH200)")
    verify_tls: bool = Field(True, description="check the MAAS region's certificate (https URLs)")
    ca_bundle: str | None = Field(None, description="CA file for the MAAS certificate, relative to the site file")


class Ufm(_Model):
    """The site's UFM Enterprise, through which `fabric ports` reads events and disables ports."""

    url: HttpUrl
    credential: str = Field(min_length=1, description="entry of `credentials` (UFM user, password env/vault)")
    auth: Literal["basic", "session", "token"] = Field(
        "basic", description="basic: HTTP Basic on /ufmRest; session: a /dologin session on /ufmRestV2; token: the "
        "credential's password is a UFM access token, on /ufmRestV3 (fabric/ufm/client.py)")
    verify_tls: bool = Field(True, description="check UFM's certificate")
    ca_bundle: str | None = Field(None, description="CA file for UFM's certificate, relative to the site file")
    timeout_s: float = Field(30.0, gt=0, le=600, description="deadline of each UFM request")
    job_timeout_s: float = Field(120.0, gt=0, le=3600, description="how long a port's disable or enable (a UFM "
                                 "job) may run before the ledger says job_timeout; `--job-timeout` overrides it")


class FabricRef(_Model):
    design: str = Field(min_length=1, description="cabling design file, relative to the site file")
    port_policy: PortPolicy = Field(default_factory=PortPolicy, description="which evidence disables a link")
    ufm: Ufm | None = Field(None, description="UFM REST; without it `fabric ports` acts in-band (ibportstate)")
    diags: FabricDiags = Field(default_factory=FabricDiags, description="how the infiniband-diags tools are run "
                               "(provision/site/fabric_diags.py): per-tool output caps")


class Tls(_Model):
    """How BMC certificates are checked: verified by default, against a CA bundle when given."""

    verify: bool = True
    ca_bundle: str | None = None


class Ssh(_Model):
    """How the controller reaches the hosts once they run an OS (health checks, bisection, jobs)."""

    user: str = "root"
    port: Port = 22
    key_file: str | None = Field(default=None, description="private key, relative to the site file")
    known_hosts: str | None = Field(default=None, description="known_hosts file; none means trust on first use")
    connect_timeout_s: float = Field(default=10.0, gt=0)
    address_overrides: dict[str, str] = Field(
        default_factory=dict, description="hostname → address[:port], where DNS does not know the hosts yet"
    )

    @field_validator("address_overrides")
    @classmethod
    def _override_ports(cls, value: dict[str, str]) -> dict[str, str]:
        for target in value.values():
            split_host_port(target, 22)  # raises on a bad port
        return value


class Policy(_Model):
    """Site decisions the lifecycle follows."""

    golden_requires_burn_in: bool = True
    golden_requires_baseline: bool = Field(
        default=True, description="a host whose class has a firmware baseline earns golden only when its last "
        "inventory (provision firmware inventory) matched it")
    burnin_floor_pct: float = Field(
        default=90.0, gt=0, le=100,
        description="a burned-in link must carry this share of the design's line rate per direction (fabric burnin)",
    )
    health_concurrency: int = Field(default=64, ge=1, le=4096)
    health_timeout_s: float = Field(default=120.0, gt=0)
    pxe_boot_mode: Literal["UEFI", "Legacy", "keep"] = Field(
        default="UEFI", description="BootSourceOverrideMode pxe-boot sets with the one-time override; keep: leave it"
    )
    pxe_power_policy: Literal["off-on", "restart"] = Field(
        default="off-on",
        description="what pxe-boot does to a server already on: ForceOff, wait for Off, then On; or ForceRestart",
    )


class Ntp(_Model):
    """Time servers for the hosts' chrony (common role). Without `servers` the hosts use the public
    pool.ntp.org pool, which an isolated management network cannot reach: name the site's servers there."""

    servers: list[str] = Field(default_factory=list, description="NTP servers (hostname or address), used with iburst")

    @field_validator("servers")
    @classmethod
    def _plain_names(cls, value: list[str]) -> list[str]:
        for server in value:
            if not server or any(c.isspace() for c in server):
                raise ValueError(f"NTP server {server!r} must be one hostname or address, without spaces")
        if len(set(value)) != len(value):
            raise ValueError("NTP servers are listed more than once")
        return value


class SiteSpec(_Model):
    """The validated content of a site file."""

    name: Hostname
    description: str = ""
    maas: Maas | None = None
    pxe_network: PxeNetwork | None = None
    fabric: FabricRef | None = None
    bmc_tls: Tls = Tls()
    ssh: Ssh = Ssh()
    policy: Policy = Policy()
    ntp: Ntp = Ntp()
    rollout: Rollout = Rollout()  # how site.yml reaches the fleet (provision/site/rollout.py)
    firmware_rollout: FirmwareRollout = FirmwareRollout()  # provision firmware|bios apply (site/firmware.py)
    slurm: Slurm | None = None  # the scheduler kept in step with the golden set (provision/site/slurm.py)
    credentials: dict[str, Credential] = Field(default_factory=dict)
    host_classes: dict[str, HostClass] = Field(default_factory=dict)
    # management / PXE switches by name (provision/site/switches.py); ethernet.yml holds the per-host cabling
    switches: dict[Hostname, ManagementSwitch] = Field(default_factory=dict)
    racks: list[Rack] = Field(min_length=1)


class Site(BaseModel):
    """A loaded site: the spec plus where it came from, with derived look-ups."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    spec: SiteSpec
    path: Path

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def directory(self) -> Path:
        return self.path.parent

    def hosts(self) -> list[Host]:
        return [host for rack in self.spec.racks for host in rack.hosts]

    def host(self, hostname: str) -> Host | None:
        for host in self.hosts():
            if host.hostname == hostname:
                return host
        return None

    def host_class(self, host: Host) -> HostClass:
        return self.spec.host_classes[host.host_class]

    def rack(self, name: str) -> Rack | None:
        return next((rack for rack in self.spec.racks if rack.name == name), None)

    @property
    def fabric_design(self) -> Path | None:
        if self.spec.fabric is None:
            return None
        return (self.directory / self.spec.fabric.design).resolve()

    @property
    def paths(self) -> SitePaths:
        return SitePaths(self.path, self.name)

    def default_state_path(self) -> Path:
        return self.paths.default_state_db
