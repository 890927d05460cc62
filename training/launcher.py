"""`python -m training launch`: start the job on every host of the golden hostfile and keep it
running. One torchrun per host (c10d rendezvous on the first host, over SSH; hosts named
localhost/127.x run without SSH), NCCL settings from the site, the flight recorder on, and every
variable of the launcher's own run that shapes it (`forwarded_env`, `--env`). The supervisor
(`training/supervisor.py`) keeps it running on golden hosts. `--scheduler slurm` submits the same job
as a Slurm batch job instead (`training/slurm_launch.py`), which Slurm keeps on golden nodes."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
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


def torchrun_argv(python: str, hosts: Sequence[Host], node_rank: int, rdzv: str, job_id: str,
                  train_args: Sequence[str]) -> list[str]:
    nproc = min(h.slots for h in hosts)
    return [python, "-m", "torch.distributed.run", f"--nnodes={len(hosts)}", f"--nproc-per-node={nproc}",
            f"--node-rank={node_rank}", "--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv}", f"--rdzv-id={job_id}",
            "--max-restarts=0", "-m", "training", "train", *train_args]


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


def _env_pairs(items: Sequence[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise LaunchError(f"--env {item!r}: KEY=VALUE")
        out[key] = value
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m training launch",
                                epilog="arguments after -- go to every rank's `python -m training train`")
    p.add_argument("--scheduler", choices=("ssh", "slurm"), default="ssh",
                   help="ssh: torchrun on every host of --hostfile, supervised here; slurm: an sbatch job")
    p.add_argument("--hostfile", type=Path, help="the job's golden hosts (--scheduler ssh)")
    p.add_argument("--spares", type=Path, help="hostfile of spare golden hosts a restart may take")
    p.add_argument("--shrink-to", default="", help="host counts a restart may shrink to, e.g. 2,4 (default: none)")
    p.add_argument("--config", required=True)
    p.add_argument("--engine", choices=("fsdp", "deepspeed"), default="fsdp")
    p.add_argument("--run-dir", type=Path, help="shared by every host (default runs/CONFIG-ENGINE)")
    p.add_argument("--gpus-per-host", type=int, default=8, help="slots for hostfile lines without slots=")
    p.add_argument("--site", type=Path, help="site YAML (its `nccl` mapping; the health check's --site)")
    p.add_argument("--fabric-design", type=Path,
                   help="fabric design YAML: NCCL_IB_HCA from the job hosts' HCAs when the site sets none")
    p.add_argument("--max-restarts", type=int, default=3)
    p.add_argument("--min-hosts", type=int, default=1)
    p.add_argument("--rdzv-port", type=int, default=29500)
    p.add_argument("--rdzv-host", default="", help="address every node reaches the rendezvous store at "
                   "(default: the first host's name; under Slurm the first node's NodeAddr)")
    p.add_argument("--health-cmd", help="run after a failure; prints JSON {hosts: [{host, verdict}], "
                   "promoted_to_golden} (default: provision health [--site SITE] --hosts {hosts} --level fast --json)")
    p.add_argument("--health-timeout-s", type=float, default=1800.0,
                   help="kill the health check after this long; every host then counts as unknown")
    p.add_argument("--anomaly-cmd", help="after each attempt: the diagnoses into the hosts' history (default with "
                   "--site: provision anomalies --site SITE --run-dir {run_dir})")
    p.add_argument("--hang-s", type=float, default=0.0, help="no step for this long: hung, restart (0: off)")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for every rank (repeatable)")
    p.add_argument("--env-manifest", type=Path, help="pack-env's bringup-env.manifest.json: refuse hosts whose "
                   "shipped environment differs")
    p.add_argument("--env-dir", default="/opt/bringup/env-ship/env", help="where provision ship unpacked it")
    p.add_argument("--python", default=sys.executable, help="Python on the hosts")
    p.add_argument("--workdir", type=Path, default=Path.cwd(), help="project checkout on the hosts")
    p.add_argument("--dry-run", action="store_true", help="print each host's command (slurm: the batch script) "
                   "and exit")
    from training.slurm_launch import add_slurm_args

    add_slurm_args(p)
    return p


def main(argv: list[str] | None = None) -> int:
    from training.supervisor import Supervisor, checkpoint_world, provision_health, zero3_resize_refusal

    raw = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in raw:
        i = raw.index("--")
        raw, extra = raw[:i], raw[i + 1:]
    a = _parser().parse_args(raw)
    if a.scheduler == "slurm":
        from training.slurm_launch import main as slurm_main

        try:
            env = _env_pairs(a.env)
        except LaunchError as e:
            print(f"launch: {e}", file=sys.stderr)
            return 2
        return slurm_main(a, extra, env)
    try:
        if a.hostfile is None:
            raise LaunchError("--scheduler ssh needs --hostfile")
        if a.nodes is not None or a.node_check:
            raise LaunchError("--nodes and --node-check are for --scheduler slurm")
        hosts = parse_hostfile(a.hostfile.read_text(), a.gpus_per_host)
        spares = parse_hostfile(a.spares.read_text(), a.gpus_per_host) if a.spares else []
        run_dir = (a.run_dir or Path("runs") / f"{a.config}-{a.engine}").resolve()
        train_args = ["--config", a.config, "--engine", a.engine, "--run-dir", str(run_dir), *extra]
        nccl = load_nccl_site(a.site)
        if nccl.ib_hca is None and a.fabric_design is not None:
            nccl = replace(nccl, ib_hca=hcas_from_fabric_design(a.fabric_design, [h.name for h in hosts]))
        site = f"--site {shlex.quote(str(a.site))} " if a.site else ""
        health = a.health_cmd or f"provision health {site}--hosts {{hosts}} --level fast --json"
        sizes = tuple(int(x) for x in a.shrink_to.split(",") if x.strip())
        golden = "" if a.health_cmd else f"provision golden {site}--json"
        sup = Supervisor(hosts, train_args, run_dir, provision_health(health, a.health_timeout_s, golden), nccl,
                         a.max_restarts, a.min_hosts, a.rdzv_port, a.python, a.workdir, spares=spares, sizes=sizes,
                         engine=a.engine, env=_env_pairs(a.env), hang_s=a.hang_s, rdzv_host=a.rdzv_host,
                         anomaly_cmd=a.anomaly_cmd or (f"provision anomalies {site}--run-dir {{run_dir}}" * bool(site)))
        if a.env_manifest is not None:
            bad = environment_mismatches([*hosts, *spares], a.env_manifest, a.env_dir)
            if any(h.name in bad for h in hosts):
                raise LaunchError("hosts whose environment is not the job's: " +
                                  "; ".join(f"{h}: {why}" for h, why in sorted(bad.items())))
            sup.spares = [h for h in spares if h.name not in bad]
        _, saved_by, _ = checkpoint_world(run_dir)
        ranks = len(hosts) * min(h.slots for h in hosts)
        refusal = zero3_resize_refusal(saved_by, ranks) if a.engine == "deepspeed" else None
        if refusal:
            raise LaunchError(refusal)
    except (LaunchError, OSError, ValueError, yaml.YAMLError) as e:
        print(f"launch: {e}", file=sys.stderr)
        return 2
    if a.dry_run:
        for host, cmd, env in sup.commands(hosts, 0):
            prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())) if host.local else ""
            print(f"{host.name}: {prefix} {shlex.join(cmd)}".replace(":  ", ": "))
        return 0
    return sup.run()
