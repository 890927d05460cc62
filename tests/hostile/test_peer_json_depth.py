"""JSON from peers has its nesting bounded before it is decoded (provision/state/peer_json.py): a UFM answer
nested 200,000 lists deep (issue 38) is one readable line and exit 1, never `internal error: RecursionError`;
the UFM client, the Slurm parser and the other peers' clients say it in their own errors."""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from fabric.errors import ParseError
from fabric.topology import End
from fabric.ufm.client import UfmClient
from fabric.ufm.errors import UfmProtocolError
from provision.errors import BringupError
from provision.site.credentials import Login, Secret
from provision.slurm.errors import SlurmAnswerInvalid
from provision.slurm.nodes import parse_sinfo_json
from provision.state.peer_json import MAX_DEPTH, JsonTooDeep, depth, loads
from tests.hostile.peers import deep_json, peer

REPO = Path(__file__).resolve().parents[2]
DISCOVERED = REPO / "tests" / "fixtures" / "fabric" / "ibsim-sim-site.ibnetdiscover.txt"
DEEP = "[" * 200_000 + "]" * 200_000


def _nesting(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_nesting(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_nesting(v) for v in value), default=0)
    return 0


_TRICKY = ["", "[", "]]", "{\"", "\\", "\\\"", "\\\\", "a\"b[", "\u00e9[", "\U0001f600}", "\n[", "\"]\"", "[]{}"]


def _document(rng: random.Random, level: int) -> Any:
    kind = rng.choice(["list", "dict", "str", "num"] if level < 12 else ["str", "num"])
    if kind == "list":
        return [_document(rng, level + 1) for _ in range(rng.randint(0, 3))]
    if kind == "dict":
        return {rng.choice(_TRICKY) + str(i): _document(rng, level + 1) for i in range(rng.randint(0, 3))}
    if kind == "str":
        return "".join(rng.choice(_TRICKY) for _ in range(rng.randint(0, 4)))
    return rng.randint(-5, 5)


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_the_measured_depth_is_the_documents_nesting_whatever_brackets_quotes_and_escapes_its_strings_hold(
        ensure_ascii: bool) -> None:
    rng = random.Random(38)
    for _ in range(400):
        doc = _document(rng, 0)
        text = json.dumps(doc, ensure_ascii=ensure_ascii, indent=rng.choice([None, 1]))
        assert depth(text) == _nesting(doc), text


def test_an_answer_one_level_past_the_bound_is_refused_and_one_at_it_decoded() -> None:
    at = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert _nesting(loads(at)) == MAX_DEPTH
    with pytest.raises(JsonTooDeep) as info:
        loads("{\"a\": " + at + "}", what="GET /ufmRest/app/events")
    assert str(info.value) == f"GET /ufmRest/app/events: JSON nested deeper than {MAX_DEPTH} levels, refused"
    # both the project's error (one line, exit 1 where nothing maps it) and what json.loads raises for bad JSON
    assert isinstance(info.value, BringupError) and isinstance(info.value, json.JSONDecodeError)
    # brackets inside strings are text, not nesting
    assert loads(json.dumps(["[" * 500, {"k": "{" * 500 + "\\\"" + "]" * 3}])) == ["[" * 500,
                                                                                    {"k": "{" * 500 + "\\\"]]]"}]


def test_two_hundred_thousand_levels_are_refused_at_once_without_recursing() -> None:
    started = time.perf_counter()
    with pytest.raises(JsonTooDeep):
        loads(DEEP)
    with pytest.raises(JsonTooDeep):
        loads(DEEP.encode("utf-16"))  # bytes in any encoding json.loads accepts are measured as text
    assert time.perf_counter() - started < 1.0


def test_bytes_and_malformed_json_behave_as_json_loads_does() -> None:
    assert loads(b'{"a": [1, "\\u00e9"]}') == {"a": [1, "\u00e9"]}
    assert loads('{"a": 1}'.encode("utf-16")) == {"a": 1}
    with pytest.raises(json.JSONDecodeError) as info:
        loads("[1, 2")
    assert not isinstance(info.value, JsonTooDeep)
    with pytest.raises(json.JSONDecodeError):
        loads('"unterminated [[[[')


def test_a_saved_ufm_answer_nested_200000_deep_is_one_line_and_exit_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fabric.cli import main

    deep = tmp_path / "events.json"
    deep.write_text(DEEP)
    for option in ("--events", "--ufm-ports"):
        capsys.readouterr()
        assert main(["ports", "plan", "--discovered", str(DISCOVERED), option, str(deep)]) == 1  # was 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Recursion" not in err, err
        assert f"{deep}: JSON nested deeper than {MAX_DEPTH} levels, refused" in err


def test_the_ufm_client_says_a_200000_deep_answer_is_a_protocol_error() -> None:
    async def scenario() -> list[BaseException]:
        errors: list[BaseException] = []
        async with peer([deep_json(200_000)]) as ufm:
            client = UfmClient(f"http://127.0.0.1:{ufm.port}", Login("admin", Secret("ufm-deep-pass")), timeout_s=5)
            async with client:
                for call in (client.port(End("0c42a10300000000", 1)), client.job("7")):
                    try:
                        await call
                    except BringupError as exc:
                        errors.append(exc)
                from fabric.ufm.events import parse_rest_events
                try:
                    parse_rest_events(await client.events(), "ufm:/ufmRest/app/events")
                except BringupError as exc:
                    errors.append(exc)
        return errors

    port, job, events = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert isinstance(port, UfmProtocolError) and isinstance(job, UfmProtocolError)
    assert "JSON nested deeper than" in str(port) and "GET /ufmRest/jobs/7" in str(job)
    assert isinstance(events, ParseError) and "nested deeper than" in str(events)


def test_slurm_answer_nested_too_deep_is_an_invalid_answer() -> None:
    with pytest.raises(SlurmAnswerInvalid, match="nested deeper than"):
        parse_sinfo_json('{"nodes": ' + DEEP + "}")


def test_a_health_agent_report_nested_200000_deep_is_an_unknown_verdict_saying_so() -> None:
    from provision.health.verdict import Verdict, judge
    from provision.ssh.client import RemoteRun

    result = judge(RemoteRun("gpu-01", 0, DEEP, "", 0.1), expected_host="gpu-01", level="fast")
    assert (result.verdict, result.reason) == (Verdict.unknown, "agent_output_garbled")
    assert f"JSON nested deeper than {MAX_DEPTH} levels" in str(result.evidence)


def test_a_run_directory_file_nested_200000_deep_is_an_unreadable_section_of_the_report(tmp_path: Path) -> None:
    from report.gather_files import ethernet

    (tmp_path / "ethernet-check.json").write_text(DEEP)
    section = ethernet(tmp_path)
    assert not section.ran and f"JSON nested deeper than {MAX_DEPTH} levels" in section.source
