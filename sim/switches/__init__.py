"""SSH management switches (cisco_nxos, arista_eos) on loopback addresses for `provision ethernet check`."""
