"""Many SSH endpoints on loopback addresses, one per simulated host, in one asyncio process.

Each endpoint answers the health agent's command by running the real agent (`tools/health`) against
that host's replay fixtures, and any other command (a job for `provision bisect`) in a shell with the
host's name in `$BRINGUP_SIM_HOST`. A faults file says which hosts replay which captures and what goes
wrong where (a refused port, a hung handshake, a wrong host key, a slow or hung command, garbled output,
a broken tool, a job that fails when the host takes part). See `faults.py` for the format.
"""
