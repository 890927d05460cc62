"""nvidia_fabricmanager's check after the start (library/nvidia_fabricmanager_state.py).

The test hosts are chroots without systemd or GPUs, so the role skips the check there: the verdicts are
tested here on `systemctl show` properties and on `nvidia-smi -q` Fabric sections in the layout NVIDIA's
nvidia-smi prints them (per GPU, "Fabric" then indented "State : ..." and "Status : ...").
"""

from __future__ import annotations

from tests.ansible.role_library import load

fm = load("nvidia_fabricmanager", "nvidia_fabricmanager_state")
UNIT = "nvidia-fabricmanager.service"


def _query(*fabrics: tuple[str, str]) -> str:
    out = "==============NVSMI LOG==============\n\nDriver Version                            : 580.159.04\n"
    for n, (state, status) in enumerate(fabrics):
        out += (f"\nGPU 00000000:{0x18 + n:02X}:00.0\n    Product Name                          : NVIDIA H200\n"
                f"    Fabric\n        State                             : {state}\n"
                f"        Status                            : {status}\n"
                "    Inforom Version\n        Image Version                     : G525.0225.00.05\n")
    return out


def test_a_running_unit_passes_and_a_failed_or_restarting_one_fails_with_where_to_look() -> None:
    running = fm.parse_unit("ActiveState=active\nSubState=running\nResult=success\nNRestarts=0\n")
    assert fm.unit_verdict(running, UNIT) is None
    failed = fm.unit_verdict(fm.parse_unit("ActiveState=failed\nSubState=failed\nResult=exit-code\nNRestarts=5\n"), UNIT)
    assert failed is not None and failed.startswith(f"{UNIT} is failed (failed, result exit-code, 5 restarts)")
    assert f"journalctl -u {UNIT}" in failed
    restarting = fm.parse_unit("ActiveState=activating\nSubState=auto-restart\nResult=exit-code\nNRestarts=2\n")
    assert fm.unit_verdict(restarting, UNIT) not in (None, "wait")
    assert fm.unit_verdict(fm.parse_unit("ActiveState=activating\nSubState=start\n"), UNIT) == "wait"


def test_the_fabric_of_every_gpu_must_complete_with_success() -> None:
    done = fm.parse_fabric(_query(("Completed", "Success"), ("Completed", "Success")))
    assert [f["gpu"] for f in done] == ["00000000:18:00.0", "00000000:19:00.0"]
    assert fm.fabric_verdict(done) is None
    assert fm.fabric_verdict(fm.parse_fabric(_query(("Completed", "Success"), ("In Progress", "N/A")))) == "wait"
    bad = fm.fabric_verdict(fm.parse_fabric(_query(("Completed", "Success"), ("Completed", "NVLink Training Failure"))))
    assert bad is not None and "00000000:19:00.0: NVLink Training Failure" in bad


def test_gpus_without_a_fabric_section_or_with_none_pass() -> None:
    assert fm.parse_fabric("GPU 00000000:18:00.0\n    Product Name : NVIDIA A100\n") == []
    assert fm.fabric_verdict(fm.parse_fabric(_query(("N/A", "N/A")))) is None
