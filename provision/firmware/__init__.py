"""Firmware and BIOS on a baseline: inventory through Redfish, drift against the site's baseline, updates.

Modules: `components.py` and `bios_resource.py` (pure parsers of FirmwareInventory members and the Bios resource),
`jobs.py` (a Dell BMC's job queue), `drift.py` (pure judgement against `provision/site/firmware.py`'s baseline),
`table.py` (the `host_firmware` table), `gate.py` (the golden policy), `read.py` (the Redfish reads), `step.py` (the
inventory step, the apply steps' base and the firmware apply step), `reconcile.py` (what a killed apply left),
`plan.py` and `rollout.py` (the waves). The BIOS apply step builds on them: `provision/bios/step.py`.
Nothing is imported here: `provision status` reads the table without loading the Redfish client.
"""
