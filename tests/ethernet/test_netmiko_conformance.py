"""netmiko's stock drivers and ntc-templates against every switch OS the simulator speaks (issue 37).

Each behaviour names its source:
- what a driver sends at session preparation and waits for: netmiko 4.8's cisco_nxos.py (`terminal width
  511`, echo only; `terminal length 0`), arista.py (`terminal width 511` until "Width set to", `terminal length
  0` until "Pagination disabled"), dell_os10_ssh.py (`terminal length 0` only: its set_terminal_width() has no
  command), linux_ssh.py (nothing: "Linux doesn't have paging by default"; netmiko's edgecore_sonic is it);
- privilege: cisco_base_connection.py (`#` in the prompt is privileged), arista.py (`enable` until `#`),
  linux_ssh.py (`sudo -s`, the password when "ssword" is asked, a `#` prompt);
- one prompt per line read, echoed after the prompt, and a busy CLI's second echo: the capture in
  netmiko's arista.py (`arista9-napalm#` / `show version | json` / `arista9-napalm#show version | json`);
- the tables: ntc-templates 9.3's templates (netmiko's `use_textfsm=True`) give the facts the project's
  reader gets; for Dell OS10 and SONiC ntc-templates has none (the project's own, nos_templates.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paramiko  # type: ignore[import-untyped]
import pytest
from netmiko import ConnectHandler
from netmiko.linux.linux_ssh import LinuxSSH
from ntc_templates.parse import parse_output
from textfsm import TextFSMError

from provision.ethernet.design import EthernetDesign, normalise_port
from provision.ethernet.parse import COMMANDS, NETMIKO_TYPE, parse_macs
from provision.ethernet.switches import SwitchView, read_switch
from provision.state.identifiers import canonical_mac
from sim.switches import session
from sim.switches.asbuilt import EthernetFaults
from sim.switches.harness import running
from tests.ethernet.conftest import PASSWORD, PLATFORMS, lab, login

PORT = 2024  # beside the other modules' labs (2022, 2023) in the same network namespace
STOCK = {"tor-r1": "cisco_nxos", "tor-r2": "arista_eos", "tor-r3": "dell_os10", "tor-r4": "linux",
         "tor-r5": "edgecore_sonic"}  # SONiC twice: netmiko's linux driver and its SONiC name for it
PROMPTS = {"tor-r1": "tor-r1#", "tor-r2": "tor-r2>", "tor-r3": "tor-r3#", "tor-r4": "admin@tor-r4:~$ "}
PREPARATION = {"cisco_nxos": ["terminal width 511", "terminal length 0"],
               "arista_eos": ["terminal width 511", "terminal length 0"],
               "dell_os10": ["terminal length 0"], "linux": [], "edgecore_sonic": []}


@pytest.fixture(scope="module")
def switches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EthernetDesign, dict[str, Any], Path]]:
    """Six racks: NX-OS and EOS (each with a port error-disabled), OS10, SONiC, a SONiC read with netmiko's
    edgecore_sonic, and an EOS that falls behind (tor-r6). One stock session per switch but the last."""
    faults = EthernetFaults(err_disabled=["gpu-r1-02", "gpu-r2-02"], switch_faults={"tor-r6": "falls_behind"})
    design, asbuilt = lab(6, 2, faults, (*PLATFORMS, "sonic", "arista_eos"))
    for s in asbuilt["switches"]:
        s["port"] = PORT
    design = design.model_copy(update={"switches": {n: s.model_copy(update={"port": PORT})
                                                    for n, s in design.switches.items()}})
    logs = tmp_path_factory.mktemp("netmiko")
    with running(asbuilt, PASSWORD):
        conns = {name: ConnectHandler(device_type=kind, host=design.switches[name].address, port=PORT,
                                      username="admin", password=PASSWORD, secret=PASSWORD,
                                      session_log=str(logs / f"{name}.log"), allow_agent=False, use_keys=False)
                 for name, kind in STOCK.items()}
        try:
            yield design, conns, logs
        finally:
            for c in conns.values():
                c.disconnect()


@pytest.fixture
def shell(switches: tuple[EthernetDesign, dict[str, Any], Path]) -> Iterator[Callable[..., paramiko.Channel]]:
    """Raw shells (no driver) on a terminal of `height` lines (netmiko's: 1000), closed after the test."""
    clients: list[paramiko.SSHClient] = []

    def open_shell(name: str, height: int = 1000) -> paramiko.Channel:
        client = paramiko.SSHClient()
        clients.append(client)
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        client.connect(switches[0].switches[name].address, PORT, "admin", PASSWORD, allow_agent=False,
                       look_for_keys=False)
        return client.invoke_shell(term="vt100", width=511, height=height)
    yield open_shell
    for c in clients:
        c.close()


def _read_until(ch: paramiko.Channel, end: str, timeout: float = 3.0) -> str:
    seen, deadline = b"", time.monotonic() + timeout
    while not seen.decode().endswith(end):
        assert time.monotonic() < deadline, f"no {end!r} after {seen!r}"
        if ch.recv_ready():
            seen += ch.recv(65536)
        else:
            time.sleep(0.01)
    return seen.decode()


@pytest.mark.parametrize("name", ["tor-r1", "tor-r2", "tor-r3", "tor-r4"])
def test_enters_sent_together_come_back_one_prompt_per_line(shell: Callable[..., paramiko.Channel], name: str) -> None:
    ch = shell(name)
    prompt = PROMPTS[name]
    assert _read_until(ch, prompt) == f"\r\n{prompt}"
    ch.send("\n\n\n")  # one write, three lines (the simulator before issue 37 echoed all three, then glued three prompts)
    assert _read_until(ch, f"\r\n{prompt}" * 3) == f"\r\n{prompt}" * 3
    ch.send("sh\x7fhow foo\r")  # echoed as the CLI reads it: BS SP BS for the erased character, Enter as CR LF
    assert _read_until(ch, prompt).startswith("sh\b \bhow foo\r\n")


def test_a_busy_cli_echoes_a_line_as_it_arrives_and_again_after_its_prompt(
        shell: Callable[..., paramiko.Channel], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "BEHIND_S", 0.6)  # this session's lines: room for the next one to arrive
    ch = shell("tor-r6")
    _read_until(ch, "tor-r6>")
    ch.send("terminal width 511\n")
    assert _read_until(ch, "terminal width 511\r\n")
    ch.send("show version\n")  # while `terminal width 511` runs, as netmiko's preparation does
    seen = _read_until(ch, "% Invalid input\r\ntor-r6>")
    assert seen == ("show version\r\nWidth set to 511 columns.\r\ntor-r6>show version\r\n% Invalid input\r\ntor-r6>")


@pytest.mark.parametrize("name", sorted(STOCK))
def test_each_stock_driver_prepares_its_session_with_the_commands_its_source_sends(
        switches: tuple[EthernetDesign, dict[str, Any], Path], name: str) -> None:
    _, conns, logs = switches
    base = conns[name].base_prompt
    assert base == {"tor-r4": "admin@tor-r4:~", "tor-r5": "admin@tor-r5:~"}.get(name, name)
    log = (logs / f"{name}.log").read_text()
    sent = [line[len(base) + 1:].strip() for line in log.splitlines() if line.startswith(base)]
    sent = [s for s in sent if s]  # what followed a prompt: the lines the CLI read, Enters left out
    assert sent[:len(PREPARATION[STOCK[name]])] == PREPARATION[STOCK[name]]
    assert not any(s.startswith("terminal") for s in sent[len(PREPARATION[STOCK[name]]):])
    if STOCK[name] == "arista_eos":  # the answers arista.py waits for
        assert "terminal width 511\nWidth set to 511 columns.\n" in log and "terminal length 0\nPagination disabled.\n" in log
    if STOCK[name] in ("cisco_nxos", "dell_os10"):  # silent: the next prompt follows the echo
        assert f"{base}#terminal length 0\n{base}#" in log


def _stock_rows(conn: Any, command: str) -> Any:
    return conn.send_command(command, use_textfsm=True)


def _project(design: EthernetDesign, name: str) -> SwitchView:
    view = read_switch(name, design.switches[name], login(name), timeout=2.0)
    assert view.state == "ok", view.reason
    return view


@pytest.mark.parametrize("name", ["tor-r1", "tor-r2"])
def test_ntc_templates_through_netmiko_read_the_facts_the_project_reads(
        switches: tuple[EthernetDesign, dict[str, Any], Path], name: str) -> None:
    design, conns, _ = switches
    platform, conn, view = design.switches[name].platform, conns[name], _project(design, name)
    macs = _stock_rows(conn, COMMANDS[platform]["macs"][0])
    assert {(canonical_mac(r["mac_address"]), int(r["vlan_id"]), normalise_port(str(r.get("ports") or r["destination_port"][0])))
            for r in macs} == {(m.mac, m.vlan, m.key) for m in view.macs}
    lldp = _stock_rows(conn, COMMANDS[platform]["lldp"][0])
    assert {(normalise_port(r["local_interface"]), r["neighbor_name"], r["neighbor_interface"], (canonical_mac(r["chassis_id"]) or ""))
            for r in lldp} == {(n.key, n.name, n.port_id, n.chassis) for p in view.lldp.values() for n in p}
    if platform == "arista_eos":
        ports = _stock_rows(conn, COMMANDS[platform]["ports"][0])
        assert {normalise_port(r["port"]): r["status"] for r in ports} == {k: p.raw for k, p in view.ports.items()}
        assert {r["status"] for r in ports} == {"connected", "notconnect", "errdisabled"}  # EOS's own words
        return
    # NX-OS: ntc-templates' status template refuses the real `linkFlapE` word...
    with pytest.raises(TextFSMError, match="linkFlapE"):
        _stock_rows(conn, COMMANDS[platform]["ports"][0])
    ports = conn.send_command(COMMANDS[platform]["ports"][0])
    flapped = [line for line in ports.splitlines() if "linkFlapE" in line]
    assert [normalise_port(line.split()[0]) for line in flapped] == ["eth1/26"]
    # ...and reads every other line as the project's extended copy of it does
    rows = parse_output(platform=platform, command="show interface status",
                        data="\n".join(line for line in ports.splitlines() if "linkFlapE" not in line))
    assert {normalise_port(r["port"]): r["status"] for r in rows} == {
        k: p.raw for k, p in view.ports.items() if k != "eth1/26"}
    assert view.ports["eth1/26"].state == "err-disabled"  # from `show interface status err-disabled`
    disabled = _stock_rows(conn, COMMANDS[platform]["errdisabled"][0])
    assert [(normalise_port(r["interface"]), r["status"]) for r in disabled] == [("eth1/26", "linkFlapErr")]


@pytest.mark.parametrize("name", ["tor-r3", "tor-r4"])
def test_ntc_templates_has_no_template_for_os10_and_sonic_so_the_projects_own_read_them(
        switches: tuple[EthernetDesign, dict[str, Any], Path], name: str) -> None:
    design, conns, _ = switches
    platform, view = design.switches[name].platform, _project(design, name)
    for what in ("macs", "ports", "lldp"):
        answer = _stock_rows(conns[name], COMMANDS[platform][what][0])
        assert isinstance(answer, str) and COMMANDS[platform][what][1].lower() in answer.lower()  # raw: no template
    assert len(view.macs) == 4 and len(view.ports) == 48 and sum(len(n) for n in view.lldp.values()) == 2


def test_sonic_reads_alike_with_netmikos_linux_and_edgecore_sonic_but_ntc_misapplies_edgecore_templates(
        switches: tuple[EthernetDesign, dict[str, Any], Path]) -> None:
    design, conns, _ = switches
    assert NETMIKO_TYPE["sonic"] == "linux" and isinstance(conns["tor-r5"], LinuxSSH)  # edgecore_sonic is linux
    stock = parse_macs("sonic", str(conns["tor-r5"].send_command("show mac")))
    assert {(m.mac, m.key) for m in stock} == {(m.mac, m.key) for m in _project(design, "tor-r5").macs}
    # ntc-templates' index matches the platform as a prefix: edgecore_sonic picks Edgecore's own OS's
    # `show interfaces status` template, which refuses SONiC's intfutil table; `linux` picks none
    with pytest.raises(TextFSMError, match=r"Interface +Lanes"):
        _stock_rows(conns["tor-r5"], "show interfaces status")
    assert isinstance(_stock_rows(conns["tor-r4"], "show interfaces status"), str)


@pytest.mark.parametrize("name", ["tor-r1", "tor-r2", "tor-r3"])
def test_output_pages_at_the_terminals_height_until_terminal_length_0(
        switches: tuple[EthernetDesign, dict[str, Any], Path], shell: Callable[..., paramiko.Channel], name: str) -> None:
    design = switches[0]
    platform = design.switches[name].platform
    command, more = COMMANDS[platform]["ports"][0], "--more--" if platform == "dell_os10" else "--More--"
    tall = shell(name)  # netmiko's 1000 lines: the 51 lines fit one page
    prompt = _read_until(tall, PROMPTS[name]).strip()
    tall.send(command + "\n")
    assert more not in _read_until(tall, prompt)
    ch = shell(name, height=24)  # a person's terminal
    _read_until(ch, prompt)
    ch.send(command + "\n")
    pages = [_read_until(ch, more)]
    assert pages[0].count("\r\n") == 1 + 24  # the echo, then one page
    while not pages[-1].endswith(prompt):
        ch.send(" ")  # the next page
        pages.append(_read_until(ch, more if len(pages) < 2 else prompt))
    assert len(pages) == 3 and more not in pages[-1]
    ch.send("terminal length 0\n")
    _read_until(ch, prompt)
    ch.send(command + "\n")
    whole = _read_until(ch, prompt)
    assert more not in whole and whole.count("\r\n") == sum(p.count("\r\n") for p in pages)


@pytest.mark.parametrize("name", ["tor-r1", "tor-r2", "tor-r3", "tor-r4"])
def test_privileged_mode_is_entered_as_each_stock_driver_enters_it(
        switches: tuple[EthernetDesign, dict[str, Any], Path], name: str) -> None:
    conn = switches[1][name]
    eos, sonic = name == "tor-r2", name == "tor-r4"
    assert conn.check_enable_mode() is not (eos or sonic)  # NX-OS and OS10 log an admin in at `#`
    conn.enable()
    assert conn.check_enable_mode() and conn.find_prompt() == {
        "tor-r2": "tor-r2#", "tor-r4": "root@tor-r4:/home/admin#"}.get(name, f"{name}#")
    if eos or sonic:
        conn.exit_enable_mode()
        assert not conn.check_enable_mode() and conn.find_prompt() == PROMPTS[name].strip()
