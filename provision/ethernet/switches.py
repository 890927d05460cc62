"""Read one management switch over SSH with netmiko: its MAC address table, its port states and its LLDP
neighbours. A switch whose LLDP answer cannot be read (LLDP disabled, another release) keeps its MACs and
ports: its view is `ok` with `lldp_reason` saying why it has no neighbours.

Every read is bounded: the connection, the login and each command have a timeout, the answer a size
cap, and a switch that pages although netmiko turned paging off (`terminal length 0`; SONiC's
shell has no pager) is caught by its `--More--` prompt rather than waited on. Any failure makes the
switch's view `unknown` with the reason; the password (resolved from the site's credential reference,
held for masking) is handed to netmiko in memory only, and every reason is masked before it leaves this module.

netmiko's stock drivers do the login and the session's preparation as they are (cisco_nxos, arista_eos,
dell_os10, and linux for SONiC's shell: what they send and what the simulator answers is pinned by
tests/ethernet/test_netmiko_conformance.py). Each command's answer is read here rather than with netmiko's
send_command, which ends an answer at the first prompt after the first echo: against a CLI that falls behind
(NX-OS, EOS under load echo a line twice, netmiko's own driver notes) it returned the prompt of an earlier line
for the answer, and it has no size cap; `_ask` takes the lines after the CLI's own prompted echo.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass, field, replace

from provision.ethernet.design import SwitchSpec
from provision.ethernet.parse import (
    COMMANDS,
    NETMIKO_TYPE,
    LldpNeighbour,
    MacEntry,
    PortState,
    UnknownFormat,
    parse_errdisabled,
    parse_lldp,
    parse_macs,
    parse_ports,
)
from provision.site.credentials import Login
from provision.state.secret_values import mask

MAX_ANSWER_BYTES = 4 * 1024 * 1024
POLL_S = 0.01  # between reads of a command's answer (netmiko's own loop delay)
_PAGER = "--more--"  # NX-OS/EOS print --More--, Dell OS10 --more--: compared case-blind


@dataclass
class SwitchView:
    name: str
    spec: SwitchSpec
    state: str = "unknown"  # ok | unknown
    reason: str = ""
    seconds: float = 0.0
    macs: list[MacEntry] = field(default_factory=list)
    ports: dict[str, PortState] = field(default_factory=dict)  # by normalised port
    lldp: dict[str, list[LldpNeighbour]] = field(default_factory=dict)  # by normalised local port
    lldp_reason: str = ""  # why there are no LLDP neighbours although the switch was read


def _connect(spec: SwitchSpec, login: Login, timeout: float) -> object:
    from netmiko import ConnectHandler

    return ConnectHandler(
        device_type=NETMIKO_TYPE[spec.platform], host=spec.address, port=spec.port, username=login.username,
        password=login.password.reveal(), timeout=timeout, conn_timeout=timeout, auth_timeout=timeout,
        banner_timeout=timeout, blocking_timeout=timeout, read_timeout_override=timeout, fast_cli=True,
        allow_agent=False, use_keys=False, session_log=None, ssh_config_file=None,
        system_host_keys=False, alt_host_keys=False)


class SwitchHung(Exception):
    """A command whose prompt never came back."""


def _patterns(base: str, command: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(the CLI's own echo of `command`: its prompt, then the command; a line that is the prompt alone)."""
    prompt = rf"{re.escape(base)}[>#$] ?"  # $: SONiC's Linux shell
    return (re.compile(rf"^{prompt}{re.escape(command)}[ \t]*\n", re.MULTILINE),
            re.compile(rf"^{prompt}$", re.MULTILINE))


def _ask(conn: object, command: str, timeout: float) -> str:
    """The command's answer: the lines after the CLI's own echo of it, up to the next prompt.

    A CLI reads one line at a time and echoes each after the prompt of the line before. The command is sent
    after an empty line, so its echo follows a prompt printed after this call began (netmiko's session
    preparation, or the last answer, has read the one before), and nothing ahead of that echo is taken for the
    answer: prompts of the session's earlier lines, or the echo a busy CLI's terminal gave the line as it
    arrived (netmiko's cisco_nxos.py and arista.py describe both)."""
    base = str(conn.base_prompt)  # type: ignore[attr-defined]  # set by netmiko's session preparation
    echo, prompt = _patterns(base, command)
    deadline = time.monotonic() + timeout
    conn.write_channel(conn.RETURN + command + conn.RETURN)  # type: ignore[attr-defined]
    seen, start, scan = "", -1, 0  # scan: where the last line not yet searched begins
    while True:
        new = str(conn.read_channel())  # type: ignore[attr-defined]  # linefeeds normalised to \n
        if new:
            seen += new
            if start < 0 and (found := echo.search(seen, scan)):
                start = scan = found.end()
            if start >= 0 and (end := prompt.search(seen, scan)):
                return seen[start:end.start()]
            scan = max(scan, seen.rfind("\n", scan) + 1)
            if len(seen) > MAX_ANSWER_BYTES:
                raise UnknownFormat(f"'{command}' answered more than {MAX_ANSWER_BYTES} bytes")
        elif seen[-2 * len(_PAGER):].rstrip(" ").lower().endswith(_PAGER):  # the pager waits for a key
            raise UnknownFormat(f"'{command}' paged its output (--More--) although paging was turned off")
        if time.monotonic() >= deadline:
            raise SwitchHung(f"'{command}': no prompt within {timeout:g} s (hung mid-output)")
        if not new:
            time.sleep(POLL_S)


def _why(exc: BaseException, spec: SwitchSpec, username: str) -> str:
    name = type(exc).__name__
    text = " ".join(str(exc).split())
    if isinstance(exc, SwitchHung):
        return text
    if "Authentication" in name:
        return f"login refused for user {username!r} (check the credential {spec.credential!r})"
    if "Timeout" in name or "timed out" in text.lower():
        return f"no answer from {spec.address}:{spec.port} in time ({name}: {text.split('.')[0][:120]})"
    return f"{name}: {text[:200]}"


def _lldp(conn: object, platform: str, timeout: float) -> tuple[dict[str, list[LldpNeighbour]], str]:
    """The switch's LLDP neighbours by local port, or none and why (the MACs and ports stand without them)."""
    try:
        neighbours = parse_lldp(platform, _ask(conn, COMMANDS[platform]["lldp"][0], timeout))
    except UnknownFormat as e:
        return {}, f"LLDP not read: {e}"
    out: dict[str, list[LldpNeighbour]] = {}
    for n in neighbours:
        out.setdefault(n.key, []).append(n)
    return out, ""


def read_switch(name: str, spec: SwitchSpec, login: Login, timeout: float) -> SwitchView:
    """The switch's MAC table and port states, or `unknown` with why; never raises."""
    view = SwitchView(name, spec)
    start = time.monotonic()
    conn: object | None = None
    try:
        conn = _connect(spec, login, timeout)
        commands = COMMANDS[spec.platform]
        macs_text = _ask(conn, commands["macs"][0], timeout)
        ports_text = _ask(conn, commands["ports"][0], timeout)
        view.macs = parse_macs(spec.platform, macs_text)
        view.ports = {p.key: p for p in parse_ports(spec.platform, ports_text)}
        if "errdisabled" in commands:
            disabled = parse_errdisabled(spec.platform, _ask(conn, commands["errdisabled"][0], timeout))
            for key, why in disabled.items():
                if key in view.ports:
                    view.ports[key] = replace(view.ports[key], state="err-disabled", raw=why)
        view.lldp, view.lldp_reason = _lldp(conn, spec.platform, timeout)
        view.state = "ok"
    except UnknownFormat as e:
        view.reason = f"unknown format: {e}"
    except Exception as e:  # netmiko/paramiko raise many kinds; each becomes the switch's reason
        view.reason = _why(e, spec, login.username)
    finally:
        if conn is not None:
            with contextlib.suppress(Exception):  # a half-dead session may fail to close; the view is decided
                conn.disconnect()  # type: ignore[attr-defined]
    view.reason = mask(view.reason)
    view.seconds = round(time.monotonic() - start, 3)
    return view
