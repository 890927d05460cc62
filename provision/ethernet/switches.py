"""Read one management switch over SSH with netmiko: its MAC address table, its port states and its LLDP
neighbours. A switch whose LLDP answer cannot be read (LLDP disabled, another release) keeps its MACs and
ports: its view is `ok` with `lldp_reason` saying why it has no neighbours.

Every read is bounded: the connection, the login and each command have a timeout, the answer a size
cap, and a switch that pages although netmiko turned paging off (`terminal length 0`; SONiC's
shell has no pager) is caught by its `--More--` prompt rather than waited on. Any failure makes the
switch's view `unknown` with the reason; the password (resolved from the site's credential reference,
held for masking) is handed to netmiko in memory only, and every reason is masked before it leaves this module.
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
STALE_PROMPTS = 8  # late prompts of earlier lines an answer may follow (read past within the command's timeout)
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


def _ask(conn: object, command: str, timeout: float) -> str:
    from netmiko.exceptions import ReadTimeout

    base = str(conn.base_prompt)  # type: ignore[attr-defined]  # set by netmiko's session preparation
    pattern = rf"{re.escape(base)}[>#$]|(?i:{re.escape(_PAGER)})"  # $: SONiC's Linux shell
    try:
        out = str(conn.send_command(command, expect_string=pattern, read_timeout=timeout,  # type: ignore[attr-defined]
                                    strip_prompt=True, strip_command=True))
        deadline = time.monotonic() + timeout
        for _ in range(STALE_PROMPTS):
            if out.strip() or time.monotonic() >= deadline:
                break
            # nothing between the echo and a prompt: that prompt was a late one of an earlier line (the session's
            # own Enters, `terminal length 0`), seen once the command was sent; the answer and its prompt follow
            more = str(conn.read_until_pattern(pattern=pattern,  # type: ignore[attr-defined]
                                               read_timeout=max(0.1, deadline - time.monotonic())))
            out = re.sub(rf"\s*{re.escape(base)}[>#$]\s*$", "", more)
        out = re.sub(rf"^(?:\s*{re.escape(base)}[>#$] ?)+", "", out)  # late prompts glued before the answer
    except ReadTimeout:
        raise SwitchHung(f"'{command}': no prompt within {timeout:g} s (hung mid-output)") from None
    if _PAGER in out.lower():
        raise UnknownFormat(f"'{command}' paged its output (--More--) although paging was turned off")
    if len(out) > MAX_ANSWER_BYTES:
        raise UnknownFormat(f"'{command}' answered more than {MAX_ANSWER_BYTES} bytes")
    return out


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
