"""Each infiniband-diags tool is capped at what its output warrants (fabric/toolrun.py `max_output_of`), whoever
runs it through a site's tools (fabric/diags.py): a forwarding-table dump of a large fabric is hundreds of MB,
one switch's counters are not. The site's prefix here is a stand-in that prints 2 MB whatever tool it is asked
for: past the caps of perfquery (one switch's ports) and ibportstate (one port), within dump_lfts' and
ibnetdiscover's. A fabric larger than the caps were sized for raises a tool's cap in its site file
(`fabric.diags.max_output_mib`, provision/site/fabric_diags.py), and the cap's error says so."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from fabric.diags import Diags
from fabric.toolrun import (
    DUMP_LFTS_MAX_OUTPUT,
    MAX_OUTPUT_SETTING,
    PERFQUERY_MAX_OUTPUT,
    ToolOutputTooLarge,
    max_output_of,
)
from provision.errors import BringupError

PRINTED = 2_000_000


@pytest.fixture
def chatty(tmp_path: Path) -> Diags:
    prefix = tmp_path / "run-diags"
    prefix.write_text(f"#!/bin/sh\nhead -c {PRINTED} /dev/zero | tr '\\0' x\n")
    prefix.chmod(0o755)
    return Diags(prefix=(str(prefix),))


def _site(tmp_path: Path, diags: str) -> Path:
    (tmp_path / "design.yml").touch()  # the loader checks only that the site's design is there
    site = tmp_path / "site.yml"
    site.write_text(f"name: big\nfabric: {{design: design.yml, diags: {diags}}}\nracks: [{{name: r1}}]\n")
    return site


@pytest.mark.parametrize("argv", [["dump_lfts"], ["ibnetdiscover"]])
def test_a_fabric_wide_dump_may_print_megabytes(chatty: Diags, argv: list[str]) -> None:
    assert len(chatty.run_sync(argv, 10).stdout) == PRINTED


@pytest.mark.parametrize("argv", [["perfquery", "-x", "-l", "7", "255"], ["ibportstate", "-D", "0,1", "5", "query"]])
def test_a_one_switch_or_one_port_tool_printing_megabytes_is_a_runaway(chatty: Diags, argv: list[str]) -> None:
    with pytest.raises(ToolOutputTooLarge, match=f"^{argv[0]} printed more than its cap of"):
        chatty.run_sync(argv, 10)


def test_the_cap_error_names_the_tool_its_cap_and_the_site_setting_that_raises_it(chatty: Diags) -> None:
    with pytest.raises(ToolOutputTooLarge) as caught:
        chatty.run_sync(["perfquery", "-x", "-l", "7", "255"], 10)
    assert "perfquery printed more than its cap of 1 MiB" in str(caught.value)
    assert re.search(r"site file: fabric\.diags\.max_output_mib: \{perfquery: <MiB>\}$", str(caught.value))


def test_a_site_that_raises_a_tools_cap_gets_its_whole_output(chatty: Diags, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRINGUP_IB_DIAGS", raising=False)
    site = Diags.for_site(_site(tmp_path, "{max_output_mib: {perfquery: 4}}"))
    assert site.max_output == {"perfquery": 4 << 20} and site.cap("ibportstate") == max_output_of("ibportstate")
    raised = dataclasses.replace(chatty, max_output=site.max_output)
    assert len(raised.run_sync(["perfquery", "-x", "-l", "7", "255"], 10).stdout) == PRINTED


@pytest.mark.parametrize(("diags", "problem"), [("{max_output_mib: {/usr/sbin/dump_lfts: 8}}", "not a tool's name"),
                                                ("{max_output_mib: {dump_lfts: 0}}", "outside 1..")])
def test_a_site_cap_is_a_tool_name_and_a_sane_size(tmp_path: Path, diags: str, problem: str) -> None:
    with pytest.raises(BringupError, match=re.escape(problem)):
        Diags.for_site(_site(tmp_path, diags))


def test_the_cap_follows_the_tool_not_its_path_and_an_unlisted_tool_has_the_others_cap() -> None:
    assert max_output_of("/usr/sbin/dump_lfts") == DUMP_LFTS_MAX_OUTPUT > 200 << 20  # Selene's: 227 MB
    assert max_output_of("perfquery") == PERFQUERY_MAX_OUTPUT < max_output_of("ibroute") < DUMP_LFTS_MAX_OUTPUT
    assert max_output_of("/usr/sbin/dump_lfts", {"dump_lfts": 8 << 30}) == 8 << 30
    assert MAX_OUTPUT_SETTING == "fabric.diags.max_output_mib"
