"""The simulated lab's loopback address plan. Every simulator binds inside 127.0.0.0/8 only.

    127.0.1.0/24    Debian test hosts, one sshd each (127.0.1.N)
    127.0.2.0/24    lab services (127.0.2.1 MAAS API, 127.0.2.2 UFM REST, ...)
    127.0.16.0/20   BMCs, one Redfish endpoint each (127.0.16.1 ... 127.0.31.254)
    127.0.32.0/20   simulated SSH hosts that replay captured tool outputs (sim/sshhosts)
    127.0.48.0/24   management switches, one SSH endpoint each (sim/switches: 127.0.48.1 ... .254)
"""

from __future__ import annotations

import ipaddress
import socket

from provision.errors import BringupError

LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
TEST_HOSTS = ipaddress.ip_network("127.0.1.0/24")
SERVICES = ipaddress.ip_network("127.0.2.0/24")
BMCS = ipaddress.ip_network("127.0.16.0/20")
SWITCHES = ipaddress.ip_network("127.0.48.0/24")

MAAS_ADDRESS = "127.0.2.1"
UFM_ADDRESS = "127.0.2.2"


class AddressPlanError(BringupError):
    """An address the simulated lab would bind to is outside its plan."""


def check_loopback(address: str) -> str:
    """Refuse anything that is not a loopback IP literal: the lab never sends traffic elsewhere."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise AddressPlanError(f"{address!r}: the simulated lab only uses loopback IP addresses") from None
    if ip not in LOOPBACK:
        raise AddressPlanError(f"{address}: outside 127.0.0.0/8, the simulated lab never binds or sends there")
    return address


def lab_host_address(n: int) -> str:
    """The N-th (1-based) Debian test host."""
    if not 1 <= n <= 254:
        raise AddressPlanError(f"test host #{n}: the plan has room for 254")
    return str(TEST_HOSTS.network_address + n)


def bmc_address(index: int) -> str:
    """The index-th (0-based) BMC: 127.0.16.1, ..., skipping .0 and .255 of each /24."""
    octet3, octet4 = 16 + index // 254, index % 254 + 1
    if octet3 > 31:
        raise AddressPlanError(f"BMC #{index}: the plan has room for {16 * 254}")
    return f"127.0.{octet3}.{octet4}"


def switch_address(index: int) -> str:
    """The index-th (0-based) management switch: 127.0.48.1 ... 127.0.48.254."""
    if not 0 <= index < 254:
        raise AddressPlanError(f"switch #{index}: the plan has room for 254")
    return str(SWITCHES.network_address + index + 1)


def free_port(address: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at `address` now ("" for every address of the namespace)."""
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])
