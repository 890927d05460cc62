"""The README's main job: a whole bring-up of the embedded simulated site, end to end.

Each step is the same command a user would type, run against a fresh state database so the demo
always starts from `declared`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from fabric.cli import main as fabric_main
from provision.cli import main as provision_main
from provision.command.context import default_site_path
from provision.command.exits import PROBLEMS
from provision.command.output import console, get_console
from sim.demo_firmware import run_firmware_stage
from sim.demo_progress import Progress
from sim.demo_slurm import run_slurm_stage
from sim.demo_training import prepare as prepare_training
from sim.demo_training import run_training_stage
from sim.lab_of_site import open_lab

REPO = Path(__file__).resolve().parents[1]

# (title, program, command line); `--site` is added to each, and the state database comes from
# $BRINGUP_STATE_DB, which the demo points at a fresh file.
STEPS: list[tuple[str, str, list[str]]] = [
    ("Harvest MACs from every BMC", "provision", ["harvest-macs"]),
    ("Find every BMC and PXE NIC on the management switches", "provision", ["ethernet", "check"]),
    ("Arm one-time PXE boot and power on", "provision", ["pxe-boot"]),
    ("Enlist, commission and deploy through MAAS", "provision", ["maas", "deploy", "--poll", "0.5"]),
    ("Validate the InfiniBand cabling against the design", "fabric", ["validate", "--live"]),
    ("Configure the deployed hosts with site.yml", "configure", []),
    ("Health checks on every host", "provision", ["health"]),
    ("Firmware and BIOS against the baseline: drift caught, fixed, checked again", "firmware", []),
    ("Port health: disable the links UFM condemns (plan, then apply)", "ports", []),
    ("Burn in every InfiniBand link at full rate", "burnin", []),
    ("Lifecycle status", "provision", ["status"]),
    ("Golden hostfile", "provision", ["golden", "--format", "deepspeed"]),
    ("Slurm: drained hosts and their reasons, a job on the golden set", "slurm", []),
    ("Train the tiny model on the golden hosts, supervised", "training", []),
]


# The states each stage takes hosts from (provision steps' table): its hosts "in progress" in the live view.
TAKES: dict[str, frozenset[str]] = {
    "harvest-macs": frozenset({"declared", "bmc_reachable"}), "pxe-boot": frozenset({"macs_harvested"}),
    "maas": frozenset({"pxe_armed", "enlisted", "commissioned"}), "configure": frozenset({"deployed"}),
    "health": frozenset({"configured"}), "firmware": frozenset({"healthy"}), "ports": frozenset({"healthy"}),
    "burnin": frozenset({"healthy"}),
    "training": frozenset({"golden"}),
}


def _takes(program: str, argv: list[str]) -> frozenset[str]:
    return TAKES.get(program if program not in ("provision", "fabric") else (argv or [""])[0], frozenset())


def _start_configure(run_dir: Path) -> tuple[subprocess.Popen[bytes], float]:
    """`ansible-playbook site.yml` started against the test hosts (the lab's inventory over the demo's state
    store), its output into the run directory; `_configure` waits for it."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_FORCE_COLOR": "0", "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    argv = [str(bin_dir / "ansible-playbook"), "-i", os.environ["BRINGUP_SIM_INVENTORY"], str(REPO / "site.yml")]
    with (run_dir / "site-yml.log").open("wb") as out:
        process = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    return process, time.monotonic()


def _configure(run_dir: Path, process: subprocess.Popen[bytes]) -> int:
    """site.yml's end: the roles configured each deployed host over SSH and the playbook recorded it (`provision
    record`), configured or failed with the task that refused and why. The play's output is in the run
    directory."""
    from provision.state import State, StateStore

    log = run_dir / "site-yml.log"
    try:
        returncode = process.wait(timeout=1500)
    except subprocess.TimeoutExpired:
        process.kill()
        returncode = process.wait()
    text = log.read_text(encoding="utf-8", errors="replace")
    console.print(text[text.rfind("PLAY RECAP"):].strip(), markup=False, highlight=False)
    with StateStore(os.environ["BRINGUP_STATE_DB"]) as store:
        for record in store.hosts():
            if record.state is State.failed and record.reason and record.reason.startswith("site_"):
                message = (record.evidence or {}).get("message") if isinstance(record.evidence, dict) else None
                console.print(f"host {record.hostname}: failed ({record.reason}): {message}", markup=False,
                              highlight=False)
    console.print(f"site.yml output: {log}")
    # 2: some host failed, 4: some host unreachable (both recorded, part of the story); anything else is ours.
    return 0 if returncode == 0 else 1 if returncode in (2, 4) else 3


def _burnin(site_file: str, run_dir: Path) -> int:
    """Plan from the fabric's real LFTs (opensm programs the lab's fabric first, as a site's SM has), run each
    stage as ib_write_bw pairs on the simulated hosts (1 s per stage), judge and record: the 1X and the lossy
    link of inventory/sim/fabric-faults.yml fail, named with both ends' locations, for the port plan."""
    from provision.site.index import load_index
    from sim.ibfabric.routing import route_state
    from sim.site_paths import ibsim_state

    route_state(ibsim_state(load_index(site_file).paths))
    plan = run_dir / "burnin-plan.json"
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = fabric_main(["burnin", "plan", "--site", site_file, "--json"])
    if code != 0:
        return code
    plan.write_text(buffer.getvalue(), encoding="utf-8")
    console.print(f"plan: {plan} ({len(json.loads(buffer.getvalue())['stages'])} stages)")
    code = fabric_main(["burnin", "run", "--plan", str(plan), "--site", site_file, "--duration", "1",
                       "--grace", "0.5"])
    code = max(code, fabric_main(["burnin", "judge", "--site", site_file, "--record"]))
    # The failing links go to the port plan as evidence (source burnin): a dry run shows them planned.
    judged = run_dir / "burnin-judge.json"
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        fabric_main(["burnin", "judge", "--site", site_file, "--json"])
    judged.write_text(buffer.getvalue(), encoding="utf-8")
    console.print(f"the judged links go to the port plan: fabric ports apply --site S --burnin {judged}")
    return max(code, fabric_main(["ports", "apply", "--site", site_file, "--burnin", str(judged)]))


def _ports(site_file: str) -> int:
    """The port plan from the fabric as it is (UFM's events: the flapping links and the high-BER port of
    inventory/sim/ufm-faults.yml) as a dry run, then applied through UFM with each link's ticket; the hosts
    behind those links leave the flow (failed ib_port_disabled) until the links are repaired and re-enabled."""
    code = fabric_main(["ports", "apply", "--site", site_file])
    if code != 0:
        return code
    return fabric_main(["ports", "apply", "--site", site_file, "--apply", "--tickets"])


def _keep_validation(site_file: str, run_dir: Path) -> None:
    """`fabric validate --live`'s result as JSON in the run directory, where `provision report` reads it."""
    from fabric.pipeline import Inputs, validate_inputs
    from report.gather_files import VALIDATION_FILE

    result = validate_inputs(Inputs(site=Path(site_file), live=True), warn=lambda _line: None)
    (run_dir / VALIDATION_FILE).write_text(json.dumps(result.report.to_dict(), indent=1), encoding="utf-8")


@dataclass
class _Run:
    """What one stage leaves for a later one: site.yml's process (started before fabric validation, which needs
    no configured host and so runs meanwhile) and the training corpus made while site.yml runs."""

    site_file: str
    run_dir: Path
    configure: tuple[subprocess.Popen[bytes], float] | None = None
    corpus: tuple[Path, Path] | None = None


def _stage(title: str, program: str, argv: list[str], run: _Run) -> int:
    """One stage of the demo: its rule, then the command a user would type (or the demo's sequence of them)."""
    site_file, run_dir = run.site_file, run.run_dir
    if program == "configure":
        console.rule(f"[bold]{title}[/]  [dim]ansible-playbook -i $BRINGUP_SIM_INVENTORY site.yml")
        if run.configure is None:
            run.configure = _start_configure(run_dir)
        # Nothing of the training stage needs a host: its corpus and PyTorch while the play runs.
        run.corpus = prepare_training(run_dir)
        console.print("while site.yml ran: fabric validation (it needs no configured host) and the training "
                      "corpus (it needs no host)")
        return _configure(run_dir, run.configure[0])
    if program == "firmware":  # sim/demo_firmware.py: inventory, plan, apply, health again
        console.rule(f"[bold]{title}[/]  [dim]provision firmware inventory | firmware/bios plan | apply; health")
        return run_firmware_stage(site_file, os.environ["BRINGUP_STATE_DB"])
    if program == "ports":
        console.rule(f"[bold]{title}[/]  [dim]fabric ports apply, then --apply --tickets")
        return _ports(site_file)
    if program == "training":  # sim/demo_training.py: the real launcher and supervisor, faults injected
        console.rule(f"[bold]{title}[/]  [dim]python -m training launch --hostfile GOLDEN")
        return run_training_stage(site_file, run_dir, run.corpus)
    if program == "slurm":  # sim/demo_slurm.py: the sync, sinfo, and a job Slurm places on the golden set
        console.rule(f"[bold]{title}[/]  [dim]provision slurm sync; sinfo -R; training launch --scheduler slurm")
        return run_slurm_stage(site_file, run_dir, run.corpus)
    if program == "burnin":
        console.rule(f"[bold]{title}[/]  [dim]fabric burnin plan | run --duration 1 | judge --record")
        return _burnin(site_file, run_dir)
    if argv[:1] == ["validate"]:  # the InfiniBand cabling needs no configured host: while site.yml runs
        run.configure = _start_configure(run_dir)
        console.print("site.yml started (its stage follows); the cabling is validated meanwhile")
    console.rule(f"[bold]{title}[/]  [dim]{program} {' '.join(argv)}")
    main = fabric_main if program == "fabric" else provision_main
    if argv[:1] == ["ethernet"]:  # kept for provision report (ethernet-check.json in the run directory)
        argv = [*argv, "--out", str(run_dir / "ethernet-check.json")]
    code = main([*argv, "--site", site_file])
    if argv[:1] == ["validate"]:
        _keep_validation(site_file, run_dir)
    return code


def _story(code: int) -> int:
    """A stage's exit code as the demo counts it: 0 clean, 1 part of the story (a command that found problems
    exits 2: failed hosts, findings, failing links; the stage's own tally says 1), anything else as it is."""
    return 1 if code == PROBLEMS else code


def run_demo(site_path: Path | None) -> int:
    started = time.monotonic()
    lab = open_lab(site_path)
    site_file = str(site_path or default_site_path())
    db = lab.run_dir / "demo.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    os.environ["BRINGUP_STATE_DB"] = str(db)
    worst = 0
    with lab.running_lab():
        os.environ.update(lab.exports())  # endpoints, keys and files the simulators publish for clients
        console.rule(f"[bold]simulated lab is up[/]  [dim]{time.monotonic() - started:.1f} s")
        for name, info in lab.status().items():
            console.print(f"  {name:<14} pid {info['pid']}")
        progress = Progress(db, get_console(), len(STEPS))
        run = _Run(site_file, lab.run_dir)
        try:
            for title, program, argv in STEPS:
                # site.yml's stage counts from the play's start (before the validation that ran beside it)
                since = run.configure[1] if program == "configure" and run.configure else None
                progress.start(title, _takes(program, argv), since)
                # A step reporting failed hosts or findings (exit 2) is part of the story; the demo goes on.
                worst = max(worst, _story(_stage(title, program, argv, run)))
                progress.finish()
        finally:
            progress.close()
            if run.configure is not None and run.configure[0].poll() is None:
                run.configure[0].kill()
                run.configure[0].wait()
        console.rule("[bold]Bring-up report[/]  [dim]provision report")
        worst = max(worst, _story(provision_main(["report", "--site", site_file])))
        console.print(progress.summary())
        console.rule("[bold]stopping the lab")
    console.print(f"demo: {time.monotonic() - started:.1f} s in all (the lab's start and stop included)")
    return 0 if worst <= 1 else worst
