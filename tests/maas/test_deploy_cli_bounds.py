"""`provision maas deploy --timeout/--poll` are range-checked: NaN, negative, zero and absurd values are refused
before any site is opened or any MAAS is contacted (issue 16: both accepted any float)."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.cli import main
from tests.sites import copy_sim_site


@pytest.mark.parametrize(("option", "value"), [
    ("--timeout", "nan"), ("--timeout", "-1"), ("--timeout", "0"), ("--timeout", "inf"), ("--timeout", "1e30"),
    ("--poll", "nan"), ("--poll", "-1"), ("--poll", "0"), ("--poll", "inf"), ("--poll", "1e9"),
])
def test_out_of_range_durations_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 option: str, value: str) -> None:
    site = copy_sim_site(tmp_path / "sim")
    code = main(["maas", "deploy", option, value, "--site", str(site), "--db", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert code == 1, err
    assert option in err and "seconds from" in err
    assert not (tmp_path / "s.db").exists(), "refused before the state store is opened"
