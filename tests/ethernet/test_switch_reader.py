"""How provision/ethernet/switches.py reads one command's answer from a netmiko channel (`_ask`), on scripted
channels: the answer is what follows the CLI's own prompted echo, whatever came before it (a busy CLI's first
echo and the prompts of earlier lines, as netmiko's arista.py capture shows); a switch that streams without
end, pages, or answers too much is stopped within the command's time."""

from __future__ import annotations

import time

import pytest

from provision.ethernet import switches
from provision.ethernet.parse import UnknownFormat
from provision.ethernet.switches import SwitchHung, _ask


class _Channel:
    """What netmiko's connection hands `_ask`: the base prompt, RETURN, and the channel's reads (normalised)."""

    base_prompt = "sw1"
    RETURN = "\n"

    def __init__(self, chunks: list[str], forever: str = "") -> None:
        self.chunks, self.forever, self.written = chunks, forever, ""

    def write_channel(self, data: str) -> None:
        self.written += data

    def read_channel(self) -> str:
        return self.chunks.pop(0) if self.chunks else self.forever


def test_the_answer_follows_the_clis_own_prompted_echo_not_a_busy_terminals_first_echo() -> None:
    chan = _Channel(["sw1#\n", "show mac address-table\n", "Pagination disabled.\n", "sw1#\nsw1#", "show mac address-table\n",
                     "Mac Address Table\n", "Vlan  Mac\nsw1#"])
    assert _ask(chan, "show mac address-table", 1.0) == "Mac Address Table\nVlan  Mac\n"
    assert chan.written == "\nshow mac address-table\n"  # after an empty line: its prompt comes after the call


def test_an_empty_answer_is_empty_and_a_prompt_inside_a_line_is_no_end() -> None:
    assert _ask(_Channel(["\nsw1#terminal length 0\nsw1#"]), "terminal length 0", 1.0) == ""
    text = "System Name: sw1#evil\n"
    assert _ask(_Channel([f"sw1# show lldp neighbors\n{text}sw1# "]), "show lldp neighbors", 1.0) == text


def test_a_switch_streaming_without_end_is_stopped_at_the_commands_time() -> None:
    start = time.monotonic()
    with pytest.raises(SwitchHung, match=r"no prompt within 0\.3 s"):
        _ask(_Channel(["sw1#show mac\n"], forever="x"), "show mac", 0.3)
    assert time.monotonic() - start < 1.0


def test_a_pager_waiting_for_a_key_is_reported_at_once_and_pager_words_in_the_text_are_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    start = time.monotonic()
    with pytest.raises(UnknownFormat, match="paged its output"):
        _ask(_Channel(["sw1#show mac\n", "a\nb\n --More-- "]), "show mac", 5.0)
    assert time.monotonic() - start < 1.0
    assert _ask(_Channel(["sw1#show lldp\n", "Descr: --More--\n", "sw1#"]), "show lldp", 1.0) == "Descr: --More--\n"
    monkeypatch.setattr(switches, "MAX_ANSWER_BYTES", 100)
    with pytest.raises(UnknownFormat, match="more than 100 bytes"):
        _ask(_Channel(["sw1#show mac\n"], forever="y" * 60), "show mac", 5.0)
