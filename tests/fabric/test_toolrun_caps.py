"""Each infiniband-diags tool is capped at what its output warrants (fabric/toolrun.py `max_output_of`), whoever
runs it through a site's tools (fabric/diags.py): a forwarding-table dump of a large fabric is hundreds of MB,
one switch's counters are not. The site's prefix here is a stand-in that prints 2 MB whatever tool it is asked
for: past the caps of perfquery (one switch's ports) and ibportstate (one port), within dump_lfts' and
ibnetdiscover's."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.diags import Diags
from fabric.toolrun import DUMP_LFTS_MAX_OUTPUT, PERFQUERY_MAX_OUTPUT, ToolOutputTooLarge, max_output_of

PRINTED = 2_000_000


@pytest.fixture
def chatty(tmp_path: Path) -> Diags:
    prefix = tmp_path / "run-diags"
    prefix.write_text(f"#!/bin/sh\nhead -c {PRINTED} /dev/zero | tr '\\0' x\n")
    prefix.chmod(0o755)
    return Diags(prefix=(str(prefix),))


@pytest.mark.parametrize("argv", [["dump_lfts"], ["ibnetdiscover"]])
def test_a_fabric_wide_dump_may_print_megabytes(chatty: Diags, argv: list[str]) -> None:
    assert len(chatty.run_sync(argv, 10).stdout) == PRINTED


@pytest.mark.parametrize("argv", [["perfquery", "-x", "-l", "7", "255"], ["ibportstate", "-D", "0,1", "5", "query"]])
def test_a_one_switch_or_one_port_tool_printing_megabytes_is_a_runaway(chatty: Diags, argv: list[str]) -> None:
    with pytest.raises(ToolOutputTooLarge, match=f"{argv[0]} .*printed more than"):
        chatty.run_sync(argv, 10)


def test_the_cap_follows_the_tool_not_its_path_and_an_unlisted_tool_has_the_others_cap() -> None:
    assert max_output_of("/usr/sbin/dump_lfts") == DUMP_LFTS_MAX_OUTPUT > 200 << 20  # Selene's: 227 MB
    assert max_output_of("perfquery") == PERFQUERY_MAX_OUTPUT < max_output_of("ibroute") < DUMP_LFTS_MAX_OUTPUT
