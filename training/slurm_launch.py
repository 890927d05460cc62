"""`python -m training launch --scheduler slurm`: the job as one Slurm batch job that keeps itself on golden nodes.

The batch script (`render_sbatch`) asks for `--nodes` whole nodes of a partition, `--requeue`, and runs one `srun`
task per node (`--ntasks-per-node=1`), each the torchrun the SSH launcher starts on a host (`torchrun_argv`), with
the same environment (`job_env`: the launcher's forwarded variables, `--env`, the flight recorder, the site's NCCL
settings). Where the job's nodes meet, and how it survives a lost node:

- Rendezvous (c10d) on the first node of the allocation (`scontrol show hostnames $SLURM_JOB_NODELIST`, first
  line), at that node's `NodeAddr` from `scontrol show node`: the address slurmctld and every slurmd reach it at,
  so it is right on a real cluster (where NodeAddr defaults to the node's name) and in a lab whose nodes are
  several slurmd of one machine (their names resolve nowhere; their NodeAddr is the machine's). Not
  `SLURM_LAUNCH_NODE_IPADDR`: that is the host sbatch ran on (a login node). `--rdzv-host` overrides it for a
  site that wants the store on another network. The task on node 0 hosts the store (`is_host=1`), the others
  are clients, so no node has to guess from its own names whether the address is its.
- Requeue: the run directory is the same for every attempt (`{job_id}` in `--run-dir` is Slurm's job id, which a
  requeue keeps), so a requeued job resumes from the run's last complete checkpoint with the same next batch
  (the training job's own resume). `TRAINING_ATTEMPT` is `SLURM_RESTART_COUNT`. A node that dies is set DOWN by
  slurmctld after SlurmdTimeout and Slurm requeues the job itself (`--requeue`; the step cannot end before,
  srun waits for the dead node). A step that fails on live nodes (a crashed rank, an NCCL error, an Xid) is
  requeued by the script: after `--node-check` (e.g. `provision health --site S --hosts {nodes} --level fast`,
  whose slurm sync drains what is no longer golden), `scontrol requeue $SLURM_JOB_ID`, at most `--max-restarts`
  times, and never after a worker's exit that no restart cures (its memory plan does not fit: torchrun's
  failure summary in the node's log, training/torchrun_report.py). Drained and down nodes take no new job,
  so the requeued job lands on golden nodes: the survivors and a spare of the partition.
- Bookkeeping: `python -m training.slurm_events` writes each attempt's start, each restart (hosts dropped and
  added, the checkpoint and step it resumes from) and the end into RUN/supervisor.jsonl, as the SSH supervisor
  does.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from training.exits import error_exit
from training.launcher import SECRET_WORDS, Host, LaunchError, NcclSite, job_env, load_nccl_site, torchrun_argv

JOB_ID = "{job_id}"  # in --run-dir: Slurm's job id, the same across requeues
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_TIME = re.compile(r"^(INFINITE|UNLIMITED|[0-9]+(-[0-9]{1,2})?(:[0-9]{1,2}){0,2})$")
_GRES = re.compile(r"^[A-Za-z0-9_:.,=-]{1,200}$")
_PLAIN = re.compile(r"^[^\s'\"\\`$]+$")  # what an #SBATCH line may hold: sbatch reads those lines, not a shell
# Options of the SSH launcher that mean nothing under Slurm (dest, default): refused rather than ignored.
SSH_ONLY = (("hostfile", None), ("spares", None), ("shrink_to", ""), ("min_hosts", 1), ("fabric_design", None),
            ("health_cmd", None), ("anomaly_cmd", None), ("hang_s", 0.0), ("env_manifest", None))
_SUB_RUN_DIR, _SUB_RDZV, _SUB_ID = "@RUN_DIR@", "@RDZV@", "@RDZV_ID@"
# Each task: its node's name for the diagnosis, node 0 hosts the rendezvous store; "$0" is the Python.
# Its output goes to RUN/logs/attempt<N>_<node>.log, named as the SSH launcher names them (srun's %N is the
# machine's host name, the same for every node of a lab).
NODE_LAUNCH = ('export TRAINING_HOST="$SLURMD_NODENAME"; exec >>"$BRINGUP_NODE_LOG$SLURMD_NODENAME.log" 2>&1; '
               'exec "$0" -m torch.distributed.run --node-rank="$SLURM_NODEID" '
               '--rdzv-conf=is_host=$(( SLURM_NODEID == 0 )) "$@"')


@dataclass(frozen=True)
class SlurmJob:
    """One training job as a Slurm batch job; validated on creation (`check`)."""

    nodes: int
    gpus_per_node: int
    run_dir: str  # absolute; may hold {job_id}
    train_args: tuple[str, ...]  # the job's `python -m training train` arguments, --run-dir left out
    python: str
    workdir: str
    env: dict[str, str] = field(default_factory=dict)  # job_env for a run dir $RUN_DIR and attempt $ATTEMPT
    job_name: str = "bringup-train"
    partition: str | None = None
    output: str | None = None  # default: the run dir's folder, <job name>-<job id>.out
    time_limit: str | None = None
    gres: str | None = None
    sbatch_args: tuple[str, ...] = ()
    rdzv_port: int = 29500
    rdzv_host: str = ""  # default: the first node's NodeAddr
    max_restarts: int = 3
    node_check: str = ""  # run after a failed step, before the requeue; {nodes}: the allocation's nodes
    node_check_timeout_s: int = 900

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise LaunchError("--nodes and --gpus-per-host must be at least 1")
        if not _NAME.match(self.job_name):
            raise LaunchError(f"--job-name {self.job_name!r}: letters, digits, '_', '.', '-' (at most 64)")
        if self.partition is not None and not _NAME.match(self.partition):
            raise LaunchError(f"--partition {self.partition!r} is not a Slurm partition name")
        if self.time_limit is not None and not _TIME.match(self.time_limit):
            raise LaunchError(f"--time {self.time_limit!r}: minutes, or days-hours:minutes:seconds")
        if self.gres is not None and not _GRES.match(self.gres):
            raise LaunchError(f"--gres {self.gres!r}: e.g. gpu:8 or gpu:h200:8")
        if not 1 <= self.rdzv_port <= 65535 or self.max_restarts < 0 or self.node_check_timeout_s < 1:
            raise LaunchError("--rdzv-port 1-65535, --max-restarts >= 0, --node-check-timeout-s >= 1")
        if not self.run_dir.startswith("/") or re.search(r"[{}\n]", self.run_dir.replace(JOB_ID, "")):
            raise LaunchError(f"--run-dir {self.run_dir!r}: an absolute path; {JOB_ID} is the only placeholder")
        if not _PLAIN.match(self.output_path()):
            raise LaunchError(f"--output {self.output_path()!r}: an absolute path without spaces or quotes")
        if "%" in self.output_folder():
            raise LaunchError(f"the output file's folder {self.output_folder()} must exist when the job starts: "
                              "give --output in a folder named without the job id")
        if self.rdzv_host and not _PLAIN.match(self.rdzv_host):
            raise LaunchError(f"--rdzv-host {self.rdzv_host!r}: a host name or address")
        for arg in self.sbatch_args:
            if not arg.startswith("--") or not _PLAIN.match(arg):
                raise LaunchError(f"--sbatch-arg {arg!r}: one sbatch option, e.g. --account=ml")
        if "\n" in self.node_check:
            raise LaunchError("--node-check: one command line")

    def output_path(self) -> str:
        if self.output:
            return self.output
        folder = str(Path(self.run_dir.replace(JOB_ID, "%j")).parent)
        return f"{folder}/{self.job_name}-%j.out"

    def output_folder(self) -> str:
        return str(Path(self.output_path()).parent)


def _words(argv: list[str], subs: dict[str, str]) -> str:
    """A shell line: each argument quoted, except the ones that are the script's own variables."""
    return " ".join(subs.get(a, shlex.quote(a)) for a in argv)


def _run_dir_word(run_dir: str) -> str:
    return '"$SLURM_JOB_ID"'.join(shlex.quote(part) if part else "" for part in run_dir.split(JOB_ID))


def task_argv(job: SlurmJob) -> list[str]:
    """What every srun task runs, less what depends on its node (NODE_LAUNCH adds that): the SSH launcher's
    torchrun, Python first."""
    hosts = [Host(f"node{i}", job.gpus_per_node) for i in range(job.nodes)]
    argv = torchrun_argv(job.python, hosts, 0, _SUB_RDZV, _SUB_ID, _SUB_RUN_DIR,
                         ["--run-dir", _SUB_RUN_DIR, *job.train_args])
    return [argv[0], *(a for a in argv[3:] if not a.startswith("--node-rank="))]


def render_sbatch(job: SlurmJob) -> str:
    """The batch script: directives, the job's environment, one srun task per node, requeue on failure."""
    q = shlex.quote
    directives = [f"--job-name={job.job_name}", f"--nodes={job.nodes}", "--ntasks-per-node=1", "--exclusive",
                  "--requeue", "--open-mode=append", f"--output={job.output_path()}"]
    directives += [f"--partition={job.partition}"] * bool(job.partition)
    directives += [f"--time={job.time_limit}"] * bool(job.time_limit) + [f"--gres={job.gres}"] * bool(job.gres)
    directives += list(job.sbatch_args)
    exports = []
    for key, value in sorted(job.env.items()):
        if key == "TORCH_NCCL_DEBUG_INFO_TEMP_FILE":
            exports.append(f'export {key}="$RUN_DIR/nccl_trace/rank_"')
        elif key == "TRAINING_ATTEMPT":
            exports.append(f'export {key}="$ATTEMPT"')
        else:
            exports.append(f"export {key}={q(value)}")
    rdzv = q(job.rdzv_host) if job.rdzv_host else \
        '"$(scontrol show node "$FIRST" | sed -n \'s/.*NodeAddr=\\([^ ]*\\).*/\\1/p\' | head -n 1)"'
    subs = {f"--rdzv-endpoint={_SUB_RDZV}": f'--rdzv-endpoint="$RDZV_HOST:{job.rdzv_port}"',
            f"--rdzv-id={_SUB_ID}": f'--rdzv-id="{job.job_name}-$SLURM_JOB_ID-$ATTEMPT"', _SUB_RUN_DIR: '"$RUN_DIR"',
            f"--log-dir={_SUB_RUN_DIR}/torchelastic": '--log-dir="$RUN_DIR/torchelastic"'}
    events = '"$PYTHON" -m training.slurm_events'
    check = job.node_check.replace("{nodes}", '"$NODES"')
    node_check = ["export NODES", f"timeout {job.node_check_timeout_s} bash -c {q(check)}",
                  'echo "bringup: node check exited $? (nodes $NODES)" >&2'] if check else []
    return "\n".join([
        "#!/bin/bash",
        "# The bringup training job, written by `python -m training launch --scheduler slurm`",
        "# (training/slurm_launch.py).",
        "# Requeued, it runs again from the top and resumes from the run directory's last complete checkpoint.",
        *(f"#SBATCH {d}" for d in directives),
        "",
        "set -uo pipefail",
        f"cd {q(job.workdir)} || exit 1",
        f"PYTHON={q(job.python)}",
        'ATTEMPT="${SLURM_RESTART_COUNT:-0}"',
        f"RUN_DIR={_run_dir_word(job.run_dir)}",
        *exports,
        'NODES="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd, -)"',
        'FIRST="${NODES%%,*}"',
        "# The rendezvous: the first node's NodeAddr, where slurmctld and the other nodes reach it.",
        f"RDZV_HOST={rdzv}",
        'RDZV_HOST="${RDZV_HOST:-$FIRST}"',
        'mkdir -p "$RUN_DIR/logs" "$RUN_DIR/nccl_trace"',
        f'{events} start --run-dir "$RUN_DIR" --attempt "$ATTEMPT" --hosts "$NODES" --job-id "$SLURM_JOB_ID" || true',
        "",
        "# One task per node: torchrun, its node rank Slurm's node id; --kill-on-bad-exit ends the step when one",
        "# task fails.",
        'export BRINGUP_NODE_LOG="$RUN_DIR/logs/attempt${ATTEMPT}_"',
        'srun --kill-on-bad-exit=1 --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 \\',
        '    --cpus-per-task="$SLURM_CPUS_ON_NODE" \\',
        f"    bash -c {q(NODE_LAUNCH)} \\",
        f'    "$PYTHON" {_words(task_argv(job)[1:], subs)}',
        "rc=$?",
        'if [ "$rc" -eq 0 ]; then',
        f'    {events} end --run-dir "$RUN_DIR" --attempt "$ATTEMPT" --outcome finished --exit-code 0 || true',
        "    exit 0",
        "fi",
        f'if [ "$ATTEMPT" -ge {job.max_restarts} ]; then',
        f'    {events} end --run-dir "$RUN_DIR" --attempt "$ATTEMPT" --outcome gave_up --exit-code "$rc" || true',
        '    exit "$rc"',
        "fi",
        "# A worker's exit that no restart cures (training/torchrun_report.py: a memory plan that does not fit).",
        'WHY="$("$PYTHON" -m training.torchrun_report "$RUN_DIR/logs/attempt${ATTEMPT}_"*.log)"',
        'if [ -n "$WHY" ]; then',
        '    echo "bringup: $WHY" >&2',
        f'    {events} end --run-dir "$RUN_DIR" --attempt "$ATTEMPT" --outcome gave_up --exit-code "$rc" '
        '--reason "$WHY" || true',
        '    exit "$rc"',
        "fi",
        "# A failed step on live nodes: the site's node check drains what it finds bad, then the job goes back to",
        "# the queue, which gives it golden nodes only (a node that died is DOWN, and Slurm requeues the job itself).",
        *node_check,
        f'{events} end --run-dir "$RUN_DIR" --attempt "$ATTEMPT" --outcome requeue --exit-code "$rc" || true',
        'scontrol requeue "$SLURM_JOB_ID" || exit "$rc"',
        "sleep 300  # slurmctld ends the script as it requeues the job",
        'exit "$rc"',
        "",
    ])


def add_slurm_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("--scheduler slurm", "the job as one Slurm batch job (training/slurm_launch.py)")
    g.add_argument("--nodes", type=int, help="whole nodes, one srun task (torchrun) on each")
    g.add_argument("--partition", help="default: the site's default slurm partition, else Slurm's")
    g.add_argument("--job-name", default="bringup-train")
    g.add_argument("--output", help="the job's output file (default: beside the run dir, JOB_NAME-%%j.out)")
    g.add_argument("--time", dest="time_limit", help="time limit (minutes, or days-hours:minutes:seconds)")
    g.add_argument("--gres", help="generic resources per node, e.g. gpu:8")
    g.add_argument("--sbatch-arg", action="append", default=[], help="one more sbatch option (repeatable)")
    g.add_argument("--node-check", default="", help="after a failed step, before the requeue: drains bad nodes; "
                   "{nodes} is the allocation (e.g. provision health --site S --hosts {nodes} --level fast)")
    g.add_argument("--node-check-timeout-s", type=int, default=900)


def site_partition(site: Path | None) -> tuple[str | None, str | None]:
    """The site's default Slurm partition (its `slurm.partitions`, the default one, else the first) and the
    SLURM_CONF its Slurm commands read; None where the site has no `slurm` section."""
    if site is None:
        return None, None
    raw = yaml.safe_load(site.read_text()) or {}
    slurm = raw.get("slurm") if isinstance(raw, dict) else None
    if not isinstance(slurm, dict):
        return None, None
    parts = [p for p in slurm.get("partitions") or [] if isinstance(p, dict) and "name" in p]
    default = next((p for p in parts if p.get("default")), parts[0] if parts else None)
    conf = slurm.get("conf")
    return (str(default["name"]) if default else None), (str(conf) if conf else None)


def job_from_args(a: argparse.Namespace, extra: list[str], env_pairs: dict[str, str]) -> tuple[SlurmJob, NcclSite]:
    for dest, default in SSH_ONLY:
        if getattr(a, dest) != default:
            raise LaunchError(f"--{dest.replace('_', '-')} is for --scheduler ssh; under Slurm the partition "
                              "gives the nodes and drained nodes stay out")
    if a.nodes is None:
        raise LaunchError("--scheduler slurm needs --nodes")
    nccl = load_nccl_site(a.site)
    partition, _ = site_partition(a.site)
    run_dir = os.path.abspath(str(a.run_dir) if a.run_dir else f"runs/{a.config}-{a.engine}-{JOB_ID}")
    job = SlurmJob(
        nodes=a.nodes, gpus_per_node=a.gpus_per_host, run_dir=run_dir,
        train_args=("--config", a.config, "--engine", a.engine, *extra), python=a.python,
        workdir=str(Path(a.workdir).resolve()), env=job_env(nccl, Path("$RUN_DIR"), 0, env_pairs),
        job_name=a.job_name, partition=a.partition or partition, output=a.output, time_limit=a.time_limit,
        gres=a.gres, sbatch_args=tuple(a.sbatch_arg), rdzv_port=a.rdzv_port, rdzv_host=a.rdzv_host,
        max_restarts=a.max_restarts, node_check=a.node_check, node_check_timeout_s=a.node_check_timeout_s)
    return job, nccl


def submit_env(site: Path | None) -> dict[str, str]:
    """sbatch's environment, which the job inherits (--export=ALL): the launcher's own, secrets left out (as
    the SSH launcher leaves them out), SLURM_CONF from the site where the environment has none."""
    env = {k: v for k, v in os.environ.items() if not any(w in k.upper() for w in SECRET_WORDS)}
    _, conf = site_partition(site)
    if conf and "SLURM_CONF" not in env:
        env["SLURM_CONF"] = conf
    return env


def submit(job: SlurmJob, script: str, env: dict[str, str], timeout_s: float = 60.0) -> str:
    """`sbatch --parsable` with the script on stdin; the job id. A copy of the script is kept beside the output."""
    Path(job.output_folder()).mkdir(parents=True, exist_ok=True)
    try:
        r = subprocess.run(["sbatch", "--parsable"], input=script, capture_output=True, text=True, env=env,
                           cwd=job.workdir, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LaunchError(f"sbatch: {e}") from e
    job_id = r.stdout.strip().split(";")[0]
    if r.returncode != 0 or not job_id.isdigit():
        raise LaunchError(f"sbatch exited {r.returncode}: {(r.stderr or r.stdout).strip()[-500:]}")
    (Path(job.output_folder()) / f"{job.job_name}-{job_id}.sbatch").write_text(script)
    return job_id


def main(a: argparse.Namespace, extra: list[str], env_pairs: dict[str, str]) -> int:
    try:
        job, _ = job_from_args(a, extra, env_pairs)
        script = render_sbatch(job)
        if a.dry_run:
            print(script, end="")
            return 0
        job_id = submit(job, script, submit_env(a.site))
    except (LaunchError, OSError, ValueError, yaml.YAMLError) as e:
        return error_exit(f"launch: {e}")
    print(f"submitted batch job {job_id}: run dir {job.run_dir.replace(JOB_ID, job_id)}, "
          f"output {job.output_path().replace('%j', job_id)}")
    return 0
