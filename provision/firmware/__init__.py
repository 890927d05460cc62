"""Firmware and BIOS on a baseline: inventory through Redfish, drift against the site's baseline, updates.

Modules: `components.py` and `bios.py` (pure parsers of FirmwareInventory members and the Bios resource),
`drift.py` (pure judgement against `provision/site/firmware.py`'s baseline), `table.py` (the `host_firmware`
table), `gate.py` (the golden policy), `read.py` (the Redfish reads), `inventory_step.py` (the inventory step).
Nothing is imported here: `provision status` reads the table without loading the Redfish client.
"""
