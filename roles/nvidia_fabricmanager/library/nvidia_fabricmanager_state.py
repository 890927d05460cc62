"""Check Fabric Manager after its start: the unit active (not failed, not restarting), the GPUs' fabric done.

Fabric Manager can exit or loop in restarts while `systemctl start` returned 0 (a version mismatch, an
NVSwitch it cannot train), and while it has not finished, CUDA on an NVSwitch system fails with
"system not yet initialized". The unit's state comes from `systemctl show`; the GPUs' from the Fabric
section `nvidia-smi -q` prints per GPU on NVSwitch-capable drivers ("State : Completed", "Status :
Success"; "In Progress" while training; "N/A"/"Not Supported" where the GPU has none). The verdicts are
pure functions, unit-tested in tests/ansible/test_fabricmanager_state.py (test hosts run no systemd).
"""

from __future__ import annotations

import re
import time

DOCUMENTATION = r"""
module: nvidia_fabricmanager_state
short_description: Fail when Fabric Manager is not active or the GPUs' fabric did not complete
options:
  unit: {type: str, default: nvidia-fabricmanager.service, description: the Fabric Manager unit}
  timeout_s: {type: int, default: 120, description: how long to wait for an activating unit or a fabric in progress}
author: bringup
"""

RETURN = r"""
unit_state: {type: dict, description: "ActiveState, SubState, Result and NRestarts of the unit"}
fabric: {type: list, description: "per GPU: bus id, fabric state and status from nvidia-smi -q"}
"""

_GPU = re.compile(r"^GPU ([0-9A-Fa-f:.]+)\s*$")
_FIELD = re.compile(r"^\s+(State|Status)\s+:\s+(.*?)\s*$")
PENDING = ("In Progress", "Not Started")
ABSENT = ("N/A", "Not Supported", "[N/A]")


def parse_unit(show: str) -> dict[str, str]:
    """`systemctl show -p ActiveState -p SubState -p Result -p NRestarts UNIT` (KEY=value lines)."""
    return dict(line.split("=", 1) for line in show.splitlines() if "=" in line)


def unit_verdict(props: dict[str, str], unit: str) -> str | None:
    """'wait' while the unit is coming up, a message when it is not running, None when it is."""
    active, sub = props.get("ActiveState", ""), props.get("SubState", "")
    if active == "active" and sub == "running":
        return None
    if active in ("activating", "reloading") and sub != "auto-restart":
        return "wait"
    return (f"{unit} is {active or 'unknown'} ({sub or '?'}, result {props.get('Result', '?')}, "
            f"{props.get('NRestarts', '?')} restarts) after its start: see journalctl -u {unit} and "
            "/var/log/fabricmanager.log (a Fabric Manager that is not the driver's exact version, or an NVSwitch "
            "it cannot train, stops it)")


def parse_fabric(query: str) -> list[dict[str, str]]:
    """The Fabric section of each GPU in `nvidia-smi -q` output: bus id, state, status."""
    out: list[dict[str, str]] = []
    gpu, in_fabric = "", False
    for line in query.splitlines():
        if (m := _GPU.match(line)) is not None:
            gpu, in_fabric = m.group(1), False
        elif line.strip() == "Fabric":
            in_fabric = True
            out.append({"gpu": gpu, "state": "", "status": ""})
        elif in_fabric and (f := _FIELD.match(line)) is not None:
            out[-1][f.group(1).lower()] = f.group(2)
        elif in_fabric and line.strip() and not line.startswith(" " * 8):
            in_fabric = False  # the next section of the same GPU
    return out


def fabric_verdict(fabric: list[dict[str, str]]) -> str | None:
    """'wait' while a GPU's fabric is training, a message when one failed, None when done or not reported."""
    failed = [f for f in fabric if f["state"] == "Completed" and f["status"] != "Success"]
    if failed:
        listed = ", ".join(f"{f['gpu']}: {f['status']}" for f in failed)
        return (f"Fabric Manager started but the GPUs' fabric failed ({listed}): check /var/log/fabricmanager.log and "
                "nvidia-smi -q's Fabric section; NVLink training errors need the NVSwitch trays checked")
    if any(f["state"] in PENDING for f in fabric):
        return "wait"
    unknown = [f for f in fabric if f["state"] not in ("Completed", *ABSENT)]
    if unknown:
        return f"unexpected fabric state in nvidia-smi -q: {', '.join(f['gpu'] + ': ' + f['state'] for f in unknown)}"
    return None


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]

    module = AnsibleModule(argument_spec={"unit": {"type": "str", "default": "nvidia-fabricmanager.service"},
                                          "timeout_s": {"type": "int", "default": 120}},
                           supports_check_mode=True)
    unit, deadline = module.params["unit"], time.monotonic() + module.params["timeout_s"]
    while True:
        _rc, show, _ = module.run_command(["systemctl", "show", "-p", "ActiveState", "-p", "SubState", "-p",
                                           "Result", "-p", "NRestarts", unit])
        props = parse_unit(show[:4096])
        problem = unit_verdict(props, unit)
        fabric: list[dict[str, str]] = []
        if problem is None:
            rc, query, _ = module.run_command(["nvidia-smi", "-q"])
            fabric = parse_fabric(query[:1 << 20]) if rc == 0 else []
            problem = fabric_verdict(fabric)
        if problem != "wait":
            break
        if time.monotonic() > deadline:
            waited = module.params["timeout_s"]
            problem = f"{unit} or the GPUs' fabric still coming up after {waited} s: {props}, {fabric}"
            break
        time.sleep(2)
    if problem:
        module.fail_json(msg=problem, unit_state=props, fabric=fabric)
    module.exit_json(changed=False, unit_state=props, fabric=fabric)


if __name__ == "__main__":
    main()
