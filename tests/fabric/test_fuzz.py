"""Fuzzing the parsers and the validator: any input gives a result or a FabricError, never a traceback.

CI runs FABRIC_FUZZ_EXAMPLES (default 100) cases per test; the full run is
`FABRIC_FUZZ_EXAMPLES=10000 .venv/bin/python -m pytest -q tests/fabric/test_fuzz.py`.
"""

from __future__ import annotations

import contextlib
import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric.design import Design, parse_design
from fabric.errors import FabricError
from fabric.parsers import parse_any
from fabric.parsers.detect import FORMATS
from fabric.pipeline import run
from tests.fabric.conftest import SIM_DESIGN, fixture_text

EXAMPLES = int(os.environ.get("FABRIC_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True,
                database=None)

_SAMPLE_LINES = [ln for name in ("ibsim-sim-site.ibnetdiscover.txt", "ibsim-sim-site.iblinkinfo.txt",
                                 "ibsim-sim-site.ibnetdiscover-p.txt", "ibsim-sim-site.iblinkinfo-l.txt")
                 for ln in fixture_text(name).splitlines()[:400]]
_DESIGN = parse_design(SIM_DESIGN.read_text())


@st.composite
def mutated_capture(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.sampled_from(_SAMPLE_LINES), min_size=0, max_size=40))
    out = []
    for line in lines:
        op = draw(st.integers(0, 5))
        if op == 0 and line:
            i = draw(st.integers(0, len(line) - 1))
            line = line[:i] + line[i + draw(st.integers(1, 5)):]
        elif op == 1:
            i = draw(st.integers(0, len(line)))
            line = line[:i] + draw(st.text(max_size=6)) + line[i:]
        elif op == 2:
            line = line.replace("4x", draw(st.sampled_from(["0x", "99x", "x", "4xFOO", "2x"])))
        out.append(line)
    sep = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    return sep.join(out)


def _parse_and_validate(text: str, fmt: str, design: Design | None = None) -> None:
    try:
        top = parse_any(text, "fuzz", fmt)
    except FabricError:
        return
    with contextlib.suppress(FabricError):
        run(design or _DESIGN, top)


@FUZZ
@given(text=st.text(max_size=400), fmt=st.sampled_from(("auto", *FORMATS)))
def test_arbitrary_text_never_crashes_a_parser(text: str, fmt: str) -> None:
    _parse_and_validate(text, fmt)


@FUZZ
@given(text=mutated_capture(), fmt=st.sampled_from(("auto", *FORMATS)))
def test_mutated_real_output_never_crashes_parse_or_validate(text: str, fmt: str) -> None:
    _parse_and_validate(text, fmt)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["source_guid", "source_port", "destination_guid", "destination_port", "width", "speed",
                         "source_port_node_description", "destination_port_dname", "links", "x"]),
        children, max_size=6),
    max_leaves=20,
)


@FUZZ
@given(value=_JSON)
def test_arbitrary_json_never_crashes_the_ufm_parser(value: object) -> None:
    _parse_and_validate(json.dumps(value), "ufm-links")


@FUZZ
@given(text=st.text(max_size=300))
def test_arbitrary_design_text_is_a_design_error_or_a_design(text: str) -> None:
    with contextlib.suppress(FabricError):
        parse_design(text)


@FUZZ
@given(links=st.lists(st.tuples(st.sampled_from(["leaf-A-r3-U40", "spine-A-r3-U24", "gpu-r1-01/mlx5_0", "nope"]),
                                st.integers(-2, 45), st.sampled_from(["leaf-A-r3-U38", "gpu-r1-02/mlx5_1", "x"]),
                                st.integers(-2, 45)), max_size=8))
def test_structurally_odd_designs_are_design_errors(links: list[tuple[str, int, str, int]]) -> None:
    text = SIM_DESIGN.read_text().split("links:")[0] + "links:\n" + "".join(
        f"  - {json.dumps([a, ap, b, bp, None])}\n" for a, ap, b, bp in links)
    with contextlib.suppress(FabricError):
        parse_design(text)
