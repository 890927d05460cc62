"""`python -m training launch`: start the job on every host of the golden hostfile and keep it
running. One torchrun per host (c10d rendezvous on the first host, over SSH; hosts named
localhost/127.x run without SSH), NCCL settings from the site, the flight recorder on, and every
variable of the launcher's own run that shapes it (`forwarded_env`, `--env`). The supervisor
(`training/supervisor.py`) keeps it running on golden hosts. `--scheduler slurm` submits the same job
as a Slurm batch job instead (`training/slurm_launch.py`), which Slurm keeps on golden nodes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

LOCAL_NAMES = {"localhost", "127.0.0.1", "::1"}
# What a measured run's environment may carry to every rank (names with a secret's word are never sent).
FORWARDED_PREFIXES = ("PYTORCH_", "TORCH_", "NCCL_", "CUDA_", "CUBLAS_", "CUDNN_", "OMP_", "MKL_", "GLOO_", "UCX_",
                      "NVTE_", "DS_", "TRAINING_", "TOKENIZERS_", "MALLOC_")
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "_KEY")


class LaunchError(Exception):
    """The job could not be launched or kept running."""


@dataclass(frozen=True)
class Host:
    name: str
    slots: int

    @property
    def local(self) -> bool:
        return self.name in LOCAL_NAMES or self.name.startswith("127.")


def parse_hostfile(text: str, default_slots: int) -> list[Host]:
    """DeepSpeed/MPI style (`host slots=N`) or one host per line; `#` comments. Duplicates are
    an error: two torchruns on one host would fight over its GPUs."""
    hosts: list[Host] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, *rest = line.split()
        slots = default_slots
        for item in rest:
            key, _, value = item.partition("=")
            if key in ("slots", "max_slots") and value.isdigit() and int(value) > 0:
                slots = int(value)
            else:
                raise LaunchError(f"hostfile line {n}: cannot read {item!r}")
        if any(h.name == name for h in hosts):
            raise LaunchError(f"hostfile line {n}: {name} listed twice")
        hosts.append(Host(name, slots))
    if not hosts:
        raise LaunchError("hostfile lists no hosts")
    return hosts


@dataclass(frozen=True)
class NcclSite:
    """The site's NCCL settings (site file, key `nccl`): HCAs to use, GPUDirect RDMA level,
    bootstrap interface, RoCE GID index, and any further NCCL_* variables verbatim."""

    ib_hca: str | None = None
    gdr_level: str | None = None
    socket_ifname: str | None = None
    ib_gid_index: int | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, object]) -> NcclSite:
        known = {"ib_hca", "gdr_level", "socket_ifname", "ib_gid_index", "env"}
        unknown = set(raw) - known
        if unknown:
            raise LaunchError(f"nccl: unknown keys {sorted(unknown)} (known: {sorted(known)})")
        extra = raw.get("env") or {}
        if not isinstance(extra, Mapping) or not all(str(k).startswith(("NCCL_", "TORCH_NCCL_")) for k in extra):
            raise LaunchError("nccl.env: a mapping of NCCL_* / TORCH_NCCL_* variables")
        gid = raw.get("ib_gid_index")
        return cls(ib_hca=_opt_str(raw.get("ib_hca")), gdr_level=_opt_str(raw.get("gdr_level")),
                   socket_ifname=_opt_str(raw.get("socket_ifname")),
                   ib_gid_index=int(str(gid)) if gid is not None else None,
                   extra={str(k): str(v) for k, v in extra.items()})

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.ib_hca:
            out["NCCL_IB_HCA"] = self.ib_hca
        if self.gdr_level:
            out["NCCL_NET_GDR_LEVEL"] = self.gdr_level
        if self.socket_ifname:
            out["NCCL_SOCKET_IFNAME"] = self.socket_ifname
            out["GLOO_SOCKET_IFNAME"] = self.socket_ifname
        if self.ib_gid_index is not None:
            out["NCCL_IB_GID_INDEX"] = str(self.ib_gid_index)
        out.update(self.extra)
        return out


def _opt_str(v: object) -> str | None:
    return None if v is None else str(v)


def load_nccl_site(path: Path | None) -> NcclSite:
    if path is None:
        return NcclSite()
    raw = yaml.safe_load(path.read_text()) or {}
    section = raw.get("nccl", {}) if isinstance(raw, dict) else {}
    if not isinstance(section, dict):
        raise LaunchError(f"{path}: `nccl` must be a mapping")
    return NcclSite.from_mapping(section)


def hcas_from_fabric_design(path: Path, hosts: Sequence[str]) -> str | None:
    """NCCL_IB_HCA from the fabric design (`fabric design generate`): the HCAs every job host has,
    in the design's order. None when the design names none of them."""
    raw = yaml.safe_load(path.read_text()) or {}
    by_host = {str(h["name"]): [str(x) for x in h.get("hcas", [])] for h in raw.get("hosts", []) if "name" in h}
    lists = [by_host[h] for h in hosts if h in by_host]
    if not lists:
        return None
    common = [hca for hca in lists[0] if all(hca in other for other in lists[1:])]
    return ",".join(common) or None


def forwarded_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The launcher's variables that shape a run (allocator, NCCL, threads, TRAINING_*), secrets left out."""
    return {k: v for k, v in environ.items() if k.startswith(FORWARDED_PREFIXES)
            and not any(w in k.upper() for w in SECRET_WORDS)}


def job_env(nccl: NcclSite, run_dir: Path, attempt: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment every rank gets: what the launcher's own run carries (`forwarded_env`, then `extra`
    from --env), site NCCL settings, the flight recorder (dumped on a collective timeout, one file per
    rank under the run), collective timing for the breakdown, the attempt number."""
    env = {**forwarded_env(os.environ), **(extra or {}),
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",  # name before PyTorch 2.9
        "TORCH_FR_BUFFER_SIZE": "2000",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(run_dir / "nccl_trace" / "rank_"),
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "TORCH_NCCL_ENABLE_TIMING": "1",
        "PYTHONUNBUFFERED": "1",
        "TRAINING_ATTEMPT": str(attempt),
    }
    env.update(nccl.env())
    return env


def torchrun_argv(python: str, hosts: Sequence[Host], node_rank: int, rdzv: str, job_id: str, run_dir: str,
                  train_args: Sequence[str]) -> list[str]:
    """One host's torchrun. Its elastic agent's files (each worker's error file) go under RUN/torchelastic,
    not into a torchelastic_* folder per launch in the host's temporary directory, which nothing removes."""
    nproc = min(h.slots for h in hosts)
    return [python, "-m", "torch.distributed.run", f"--nnodes={len(hosts)}", f"--nproc-per-node={nproc}",
            f"--node-rank={node_rank}", "--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv}", f"--rdzv-id={job_id}",
            "--max-restarts=0", f"--log-dir={run_dir}/torchelastic", "-m", "training", "train", *train_args]


def host_command(host: Host, argv: Sequence[str], env: Mapping[str, str], workdir: Path) -> list[str]:
    if host.local:
        return list(argv)
    assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
    remote = f"cd {shlex.quote(str(workdir))} && env {assignments} {shlex.join(argv)}"
    # -tt: the remote torchrun gets a terminal, so when the supervisor stops this ssh client the remote
    # side sees SIGHUP and torchrun tears its workers down instead of running on orphaned.
    return ["ssh", "-tt", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=30", host.name, remote]


ENV_SUMMARY = ".bringup-env-summary.json"  # written by pack-env, unpacked by `provision ship`


def _host_summary(host: Host, env_dir: str, timeout_s: float) -> str:
    path = env_dir.replace("{host}", host.name) + "/" + ENV_SUMMARY
    if host.local:
        p = Path(path)
        return p.read_text()[:65536] if p.is_file() else ""
    r = subprocess.run(["ssh", "-o", "BatchMode=yes", host.name, f"head -c 65536 {shlex.quote(path)}"],
                       capture_output=True, text=True, timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    return r.stdout if r.returncode == 0 else ""


def environment_mismatches(hosts: Sequence[Host], manifest: Path, env_dir: str, timeout_s: float = 30.0
                           ) -> dict[str, str]:
    """Host -> why its environment is not the job's (pack-env manifest): missing, or another env_id/versions."""
    want = json.loads(manifest.read_text()[:1 << 20])

    def judge(host: Host) -> tuple[str, str | None]:
        try:
            got = json.loads(_host_summary(host, env_dir, timeout_s) or "null")
        except (json.JSONDecodeError, subprocess.TimeoutExpired, OSError):
            got = None
        if not isinstance(got, dict):
            return host.name, "no shipped environment (provision ship)"
        if got.get("env_id") != want["env_id"] or got.get("versions") != want["versions"]:
            return host.name, f"environment {got.get('env_id')} {got.get('versions')}, the job's {want['env_id']}"
        return host.name, None

    with ThreadPoolExecutor(max_workers=min(64, len(hosts) or 1)) as pool:
        return {h: why for h, why in pool.map(judge, hosts) if why}
