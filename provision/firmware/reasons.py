"""The failure reasons of the baseline steps (their remediation is in provision/steps/pipeline.py)."""

from __future__ import annotations

DRIFT_REASONS = frozenset({"firmware_drift", "bios_drift"})
# Failures of the baseline steps themselves: such a host is planned again by apply, and put back into the flow by
# an inventory that finds it on its baseline (an update that timed out here may have finished on the BMC).
BASELINE_REASONS = DRIFT_REASONS | {
    "firmware_image_mismatch", "firmware_update_refused", "firmware_update_failed", "firmware_task_timeout",
    "firmware_task_off_bmc", "bmc_did_not_return", "firmware_version_unchanged", "bios_setting_refused",
    "bios_not_applied", "reboot_timeout"}
# The intents the apply steps write (system "bmc"): a killed apply leaves them open for the next inventory.
ACTIONS = ("firmware_update", "bios_settings")
