"""The README's main job: a whole bring-up of the embedded simulated site, end to end.

Each step is the same command a user would type, run against a fresh state database so the demo
always starts from `declared`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

from fabric.cli import main as fabric_main
from provision.cli import main as provision_main
from provision.cli.context import default_site_path
from provision.cli.output import console
from sim.__main__ import open_lab
from sim.demo_training import run_training_stage

# (title, program, command line); `--site` is added to each, and the state database comes from
# $BRINGUP_STATE_DB, which the demo points at a fresh file.
STEPS: list[tuple[str, str, list[str]]] = [
    ("Harvest MACs from every BMC", "provision", ["harvest-macs"]),
    ("Find every BMC and PXE NIC on the management switches", "provision", ["ethernet", "check"]),
    ("Arm one-time PXE boot and power on", "provision", ["pxe-boot"]),
    ("Enlist, commission and deploy through MAAS", "provision", ["maas", "deploy", "--poll", "0.5"]),
    ("Validate the InfiniBand cabling against the design", "fabric", ["validate", "--live"]),
    ("Configure the deployed hosts", "configure", []),
    ("Health checks on every host", "provision", ["health"]),
    ("Port health: disable the links UFM condemns (plan, then apply)", "ports", []),
    ("Burn in every InfiniBand link at full rate", "burnin", []),
    ("Lifecycle status", "provision", ["status"]),
    ("Golden hostfile", "provision", ["golden", "--format", "deepspeed"]),
    ("Train the tiny model on the golden hosts, supervised", "training", []),
]


CONFIGURE_REASON = (
    "demo: the simulated GPU hosts replay captured tool outputs and cannot run Ansible; "
    "playbooks/site.yml runs on real Debian test hosts in tests/ansible"
)


def _configure(site_file: str) -> int:
    """Record `configured` for every deployed host, as an operator override that says why.

    The embedded site's GPU hosts are SSH endpoints replaying captures (sim/sshhosts), not machines an
    Ansible play can configure; the playbook itself is exercised against debootstrapped Debian hosts
    (`python -m sim.testhosts up`, tests/ansible). The override is visible as such in each history.
    """
    from provision.site.index import load_index
    from provision.state import State, StateStore

    index = load_index(site_file)
    store = StateStore(os.environ["BRINGUP_STATE_DB"])
    deployed = [h.hostname for h in index.hosts if h.role == "gpu" and store.get(h.hostname).state is State.deployed]
    for host in deployed:
        store.mark(host, State.configured, reason=CONFIGURE_REASON, command="demo-configure")
    store.close()
    console.print(f"{len(deployed)} deployed GPU hosts recorded as configured (override: {CONFIGURE_REASON})")
    return 0


def _burnin(site_file: str, run_dir: Path) -> int:
    """Plan from the fabric's real LFTs (opensm programs the lab's fabric first, as a site's SM has), run each
    stage as ib_write_bw pairs on the simulated hosts (1 s per stage), judge and record: the 1X and the lossy
    link of inventory/sim/fabric-faults.yml fail, named with both ends' locations, for the port plan."""
    from provision.site.index import load_index
    from sim.ibfabric.routing import route_state

    route_state(load_index(site_file).paths.ibsim_state)
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
    from provision.report.gather_files import VALIDATION_FILE

    result = validate_inputs(Inputs(site=Path(site_file), live=True), warn=lambda _line: None)
    (run_dir / VALIDATION_FILE).write_text(json.dumps(result.report.to_dict(), indent=1), encoding="utf-8")


def run_demo(site_path: Path | None) -> int:
    lab = open_lab(site_path)
    site_file = str(site_path or default_site_path())
    db = lab.run_dir / "demo.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    os.environ["BRINGUP_STATE_DB"] = str(db)
    worst = 0
    with lab.running_lab():
        os.environ.update(lab.exports())  # endpoints, keys and files the simulators publish for clients
        console.rule("[bold]simulated lab is up")
        for name, info in lab.status().items():
            console.print(f"  {name:<14} pid {info['pid']}")
        for title, program, argv in STEPS:
            if program == "configure":
                console.rule(f"[bold]{title}[/]  [dim]provision mark HOST configured")
                worst = max(worst, _configure(site_file))
                continue
            if program == "ports":
                console.rule(f"[bold]{title}[/]  [dim]fabric ports apply, then --apply --tickets")
                worst = max(worst, _ports(site_file))
                continue
            if program == "training":  # sim/demo_training.py: the real launcher and supervisor, faults injected
                console.rule(f"[bold]{title}[/]  [dim]python -m training launch --hostfile GOLDEN")
                worst = max(worst, run_training_stage(site_file, lab.run_dir))
                continue
            if program == "burnin":
                console.rule(f"[bold]{title}[/]  [dim]fabric burnin plan | run --duration 1 | judge --record")
                worst = max(worst, _burnin(site_file, lab.run_dir))
                continue
            console.rule(f"[bold]{title}[/]  [dim]{program} {' '.join(argv)}")
            run = fabric_main if program == "fabric" else provision_main
            if argv[:1] == ["ethernet"]:  # kept for provision report (ethernet-check.json in the run directory)
                argv = [*argv, "--out", str(lab.run_dir / "ethernet-check.json")]
            code = run([*argv, "--site", site_file])
            if argv[:1] == ["validate"]:
                _keep_validation(site_file, lab.run_dir)
            # A step reporting failed hosts (exit 1) is part of the story; the demo goes on.
            worst = max(worst, code)
        console.rule("[bold]Bring-up report[/]  [dim]provision report")
        worst = max(worst, provision_main(["report", "--site", site_file]))
        console.rule("[bold]stopping the lab")
    return 0 if worst <= 1 else worst
