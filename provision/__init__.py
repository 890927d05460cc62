"""bringup's controller: site model, lifecycle state store, Redfish, MAAS, health fan-out, golden set, CLI."""
