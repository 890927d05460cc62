"""Ethernet cabling: where every BMC and PXE NIC is plugged, asked of the management switches.

`design.py` is what the datacenter says (switches, and per host which switch port its BMC and PXE NICs
are cabled to), `switches.py` reads each switch over SSH with netmiko, `parse.py` turns its answers into
rows with ntc-templates, `compare.py` locates every MAC and compares it with the design, `check.py` is
the one library call `provision ethernet check` makes.
"""
