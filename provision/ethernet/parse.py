"""A switch's answers as rows, parsed with ntc-templates (the maintained TextFSM templates), or with our own
TextFSM templates (`nos_templates.py`) for the platforms ntc-templates 9.3 has none for (dell_os10, sonic).
ntc-templates does the job as is for NX-OS and EOS MAC tables, LLDP details, EOS port status and NX-OS's
error-disabled listing; NX-OS port status uses its template with the real `linkFlapE` word added, which the
original refuses (tests/ethernet/test_netmiko_conformance.py reads the simulator through netmiko's own
`use_textfsm` path and checks both give the facts this module gives).

Each platform has the commands it is asked and the header its real output starts its table with: an
answer without that header is an unknown format (a different NOS release, an error message, a login
banner) and the switch is reported `unknown`, never read as "no MACs learnt".
"""

from __future__ import annotations

from dataclasses import dataclass

from provision.ethernet.design import normalise_port
from provision.state.identifiers import canonical_mac

# platform -> {what: (command, a header line its real output carries)}
COMMANDS: dict[str, dict[str, tuple[str, str]]] = {
    "cisco_nxos": {"macs": ("show mac address-table", "MAC Address"),
                   "ports": ("show interface status", "Port"),
                   # NX-OS's status column has no word for error-disabled: its own command lists them
                   "errdisabled": ("show interface status err-disabled", "Reason"),
                   "lldp": ("show lldp neighbors detail", "Capability codes")},
    "arista_eos": {"macs": ("show mac address-table", "mac Address"),
                   "ports": ("show interfaces status", "Port"),
                   "lldp": ("show lldp neighbors detail", "LLDP neighbors")},
    "dell_os10": {"macs": ("show mac address-table", "Mac Address"),
                  "ports": ("show interface status", "Tagged-Vlans"),
                  "lldp": ("show lldp neighbors", "Rem Host Name")},
    # SONiC's click CLI at the Linux shell (community SONiC: admin@switch:~$)
    "sonic": {"macs": ("show mac", "MacAddress"),
              "ports": ("show interfaces status", "Lanes"),
              "lldp": ("show lldp neighbors", "LLDP neighbors")},
}
# our platform -> netmiko's device type (SONiC's shell is a Linux login: netmiko's edgecore_sonic is LinuxSSH too,
# but under that name ntc-templates applies Edgecore's own OS's templates, which refuse SONiC's tables)
NETMIKO_TYPE = {"cisco_nxos": "cisco_nxos", "arista_eos": "arista_eos", "dell_os10": "dell_os10", "sonic": "linux"}

# port status words of each NOS -> up | down | err-disabled | admin-down
_STATE = {"connected": "up", "up": "up", "notconnect": "down", "notconnec": "down", "down": "down",
          "xcvrabsen": "down", "xcvrabsent": "down", "sfpabsent": "down", "nooperm": "down",
          "noopermem": "down", "inactive": "down", "linkflape": "err-disabled",
          "err-disabled": "err-disabled", "errdisabled": "err-disabled",
          "errdisabl": "err-disabled", "err-disab": "err-disabled", "suspnd": "down",
          "disabled": "admin-down", "sfpinvali": "down"}


class UnknownFormat(ValueError):
    """The answer is not the table this platform's command prints."""


@dataclass(frozen=True)
class MacEntry:
    mac: str
    vlan: int | None
    port: str  # as the switch names it
    key: str  # normalised port


@dataclass(frozen=True)
class PortState:
    port: str
    key: str
    state: str  # up | down | err-disabled | admin-down | other:<word>
    raw: str
    vlan: str


@dataclass(frozen=True)
class LldpNeighbour:
    port: str  # the local port, as the switch names it
    key: str  # normalised local port
    name: str  # the neighbour's system name (a host announces its hostname)
    port_id: str  # the neighbour's port id (a host: its interface name, e.g. eno1)
    chassis: str  # the neighbour's chassis id, normalised as a MAC when it is one ('' otherwise)
    description: str = ""  # the neighbour's port description, when the platform's answer has it

    @property
    def host(self) -> str:
        """The system name without its domain: gpu-r2-07.lab.example is gpu-r2-07."""
        return self.name.split(".")[0].lower()


def _rows(platform: str, what: str, text: str) -> list[dict[str, object]]:
    from ntc_templates.parse import parse_output  # loaded by the first switch answer, not by importing steps

    from provision.ethernet import nos_templates

    command, header = COMMANDS[platform][what]
    if header.lower() not in text.lower():
        first = next((line.strip() for line in text.splitlines() if line.strip()), "(empty)")
        raise UnknownFormat(f"'{command}' answered without its table header ({first[:80]!r})")
    try:
        if (platform, command) in nos_templates.TEMPLATES:
            return nos_templates.parse(platform, command, text)
        rows: list[dict[str, object]] = parse_output(platform=platform, command=command, data=text)
    except Exception as e:  # textfsm raises its own errors on a line its template refuses
        raise UnknownFormat(f"'{command}': {type(e).__name__}: {str(e)[:120]}") from None
    return rows


def parse_macs(platform: str, text: str) -> list[MacEntry]:
    out = []
    for row in _rows(platform, "macs", text):
        ports = row.get("ports") or row.get("destination_port") or []
        port = str(ports[0] if isinstance(ports, list) and ports else ports)
        mac = canonical_mac(str(row.get("mac_address", "")))
        vlan = str(row.get("vlan_id", ""))
        if mac and port:
            out.append(MacEntry(mac, int(vlan) if vlan.isdigit() else None, port, normalise_port(port)))
    return out


def parse_ports(platform: str, text: str) -> list[PortState]:
    out = []
    for row in _rows(platform, "ports", text):
        raw = str(row.get("status", ""))
        state = _STATE.get(raw.lower(), f"other:{raw}")
        if str(row.get("admin", "")).lower() == "down":  # SONiC: Oper and Admin columns
            state, raw = "admin-down", f"{raw}/admin down"
        port = str(row.get("port", ""))
        out.append(PortState(port, normalise_port(port), state, raw, str(row.get("vlan_id", ""))))
    return out


def parse_errdisabled(platform: str, text: str) -> dict[str, str]:
    """Normalised port -> why it is error-disabled (NX-OS `show interface status err-disabled`)."""
    out = {}
    for row in _rows(platform, "errdisabled", text):
        why = f"{row.get('status', '')} {row.get('port_error', '')}".strip()
        out[normalise_port(str(row.get("interface", "")))] = why
    return out


def parse_lldp(platform: str, text: str) -> list[LldpNeighbour]:
    """Every LLDP neighbour (`show lldp neighbors detail`), by the local port it is heard on."""
    out = []
    for row in _rows(platform, "lldp", text):
        port = str(row.get("local_interface", ""))
        name = str(row.get("neighbor_name", "")).strip('"')
        if port and name:
            port_id = str(row.get("neighbor_interface", "")).strip('"')
            description = str(row.get("port_description", "")).strip('"')
            out.append(LldpNeighbour(port, normalise_port(port), name, port_id,
                                     canonical_mac(str(row.get("chassis_id", ""))) or "", description))
    return out
