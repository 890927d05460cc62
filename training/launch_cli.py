"""`python -m training launch`: the options, then the job (supervised torchrun over SSH, or an sbatch job)."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import yaml

from training.exits import error_exit
from training.launcher import (
    LaunchError,
    environment_mismatches,
    hcas_from_fabric_design,
    load_nccl_site,
    parse_hostfile,
)


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
    raw = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in raw:
        i = raw.index("--")
        raw, extra = raw[:i], raw[i + 1:]
    a = _parser().parse_args(raw)
    # after the options: the supervisor brings torch (checkpoints), which `--help` and a bad option need not load
    from training.supervisor import Supervisor, checkpoint_world, provision_health, zero3_resize_refusal

    if a.scheduler == "slurm":
        from training.slurm_launch import main as slurm_main

        try:
            env = _env_pairs(a.env)
        except LaunchError as e:
            return error_exit(f"launch: {e}")
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
        return error_exit(f"launch: {e}")
    if a.dry_run:
        for host, cmd, env in sup.commands(hosts, 0):
            prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())) if host.local else ""
            print(f"{host.name}: {prefix} {shlex.join(cmd)}".replace(":  ", ": "))
        return 0
    return sup.run()
