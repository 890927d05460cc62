"""What the inventory says of a killed apply's change promises what the next apply does: a firmware update is
"held for the next reboot, not sent again" only where the BMC's Scheduled FirmwareUpdate job installs one of the
pin's drifted components (the apply's own test, `HostFirmware.staged_job`), never for any Scheduled job.

Job shapes: Dell's DellJob (REFERENCE-wave3 B4): `JobType` FirmwareUpdate, `JobState` Scheduled, `Name`
"Firmware Update: <component name>", as the simulated iDRAC names them (sim/redfish/firmware.py).
"""

from __future__ import annotations

from provision.firmware.components import Component, Kind
from provision.firmware.drift import Drift, Judgement
from provision.firmware.jobs import PendingJob
from provision.firmware.read import HostFirmware
from provision.firmware.reconcile import LANDED, NOT_LANDED, NOT_READ, THEN, what_the_bmc_shows
from provision.firmware.table import FirmwareRow

HCA = Component("Installed-0-28.39.1002__InfiniBand.Slot.31-1", "InfiniBand.Slot.31-1", Kind.hca,
                "Mellanox ConnectX-7 Single Port NDR InfiniBand", "28.39.1002", True,
                "/redfish/v1/UpdateService/FirmwareInventory/Installed-0-28.39.1002__InfiniBand.Slot.31-1")
NIC = Component("Installed-0-26.36.1010__NIC.Integrated.1-1-1", "NIC.Integrated.1-1-1", Kind.nic,
                "Mellanox ConnectX-6 Lx 2x25G OCP NIC", "26.36.1010", True,
                "/redfish/v1/UpdateService/FirmwareInventory/Installed-0-26.36.1010__NIC.Integrated.1-1-1")
HCA_DRIFT = Drift("firmware", HCA.key, "28.39.1002", "28.43.1014", "hca", "hca")
TARGET = "hca 28.43.1014"  # the intent's target: the update's pin and the version it wants


def job(name: str, job_type: str = "FirmwareUpdate") -> PendingJob:
    return PendingJob("JID_001", job_type, "Scheduled", name, "Task successfully scheduled.")


def row(*jobs: PendingJob, on_baseline: bool = False) -> FirmwareRow:
    found = HostFirmware((HCA, NIC), None, jobs=jobs)
    judged = Judgement(firmware=() if on_baseline else (HCA_DRIFT,))
    return FirmwareRow("h00", 0.0, found.as_json(), judged.as_json(), on_baseline, "firmware-inventory")


def test_a_scheduled_update_of_another_component_is_not_the_dead_runs_change_and_the_next_apply_sends_it() -> None:
    other = row(job(f"Firmware Update: {NIC.name}"))
    assert what_the_bmc_shows("firmware_update", TARGET, other) == NOT_LANDED
    # the apply decides the same from the same inventory: nothing staged for the HCA, the update is sent
    assert HostFirmware.from_json(other.inventory).staged_job([HCA.key]) is None


def test_a_scheduled_update_of_the_pins_component_is_activated_by_the_next_apply_not_sent_again() -> None:
    held = row(job(f"Firmware Update: {NIC.name}"), job(f"Firmware Update: {HCA.name}"))
    assert what_the_bmc_shows("firmware_update", TARGET, held) == \
        f"the BMC holds it for the next reboot (job JID_001 Scheduled): {THEN}"
    assert HostFirmware.from_json(held.inventory).staged_job([HCA.key]) is not None
    # a job for the HCA says nothing of another pin's update (the BMC's own firmware is never staged)
    assert what_the_bmc_shows("firmware_update", "bmc >= 7.10.30.00", held) == NOT_LANDED


def test_a_bios_change_is_held_only_by_a_scheduled_bios_job_and_a_host_on_baseline_is_left_alone() -> None:
    assert what_the_bmc_shows("bios_settings", "ProcCStates=Disabled", row(job(f"Firmware Update: {HCA.name}"))) \
        == NOT_LANDED
    bios = what_the_bmc_shows("bios_settings", "ProcCStates=Disabled",
                              row(job("Configure: BIOS.Setup.1-1", "BIOSConfiguration")))
    assert bios.startswith("the BMC holds a BIOS change for the next reboot (job JID_001 Scheduled)")
    assert bios.endswith(THEN)
    assert what_the_bmc_shows("firmware_update", TARGET, row(job(f"Firmware Update: {HCA.name}"),
                                                             on_baseline=True)) == LANDED


def test_a_host_with_no_inventory_row_says_it_was_not_read_and_that_the_next_apply_waits_for_an_inventory() -> None:
    # plan.py blocks a host with no judgement ("never inventoried"): the line promises that, not a BMC reading
    for action, target in (("firmware_update", TARGET), ("bios_settings", "ProcCStates=Disabled")):
        said = what_the_bmc_shows(action, target, None)
        assert said == NOT_READ and said.startswith("not read: ")
        assert "the BMC shows" not in said and "`provision firmware inventory`" in said
