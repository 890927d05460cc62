"""SSH management switches (cisco_nxos, arista_eos, dell_os10, sonic) on loopback, for `provision ethernet check`."""
