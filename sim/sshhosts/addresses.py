"""Where the simulated SSH hosts listen.

    127.0.32.0/20   simulated SSH hosts (127.0.32.1 ... 127.0.47.254: 4,064 endpoints, skipping .0 and .255)

This range sits beside the lab's plan in `sim/addresses.py` (test hosts 127.0.1.0/24, services
127.0.2.0/24, BMCs 127.0.16.0/20) and overlaps none of them: the Debian test hosts keep 127.0.1.N for
their own sshd, and a 512-host health benchmark fits here.
"""

from __future__ import annotations

import ipaddress

from sim.addresses import AddressPlanError

SSH_HOSTS = ipaddress.ip_network("127.0.32.0/20")
DEFAULT_PORT = 2222
CAPACITY = 16 * 254


def ssh_host_address(index: int) -> str:
    """The index-th (0-based) simulated SSH host."""
    if not 0 <= index < CAPACITY:
        raise AddressPlanError(f"simulated SSH host #{index}: the plan has room for {CAPACITY}")
    octet3, octet4 = 32 + index // 254, index % 254 + 1
    return f"127.0.{octet3}.{octet4}"
