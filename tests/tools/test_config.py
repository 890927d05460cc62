from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.health.config import DEFAULT_CRITICAL_XIDS, load_config, parse_config
from tools.health.errors import ConfigError

from .conftest import H200, REPLAY

MINIMAL = {"gpu": {"count": 8, "model": "NVIDIA H100 80GB HBM3"}}


def problems(data: object) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return info.value.problems


def test_minimal_config_takes_policy_defaults_but_no_site_facts() -> None:
    exp = parse_config(MINIMAL)
    assert exp.gpu.count == 8 and exp.gpu.driver_version is None
    assert exp.ib.hca_count == 0 and exp.long is None
    assert exp.storage.disk_max_used_pct == 95.0
    assert 79 in exp.kernel_log.xid_critical and 13 not in exp.kernel_log.xid_critical
    assert exp.kernel_log.xid_critical == DEFAULT_CRITICAL_XIDS


def test_shipped_configs_load() -> None:
    for path in [H200 / "config-h200x2.json", *REPLAY.glob("expectations-*.json")]:
        exp = load_config(path)
        assert exp.gpu.model == "NVIDIA H200"


def test_unknown_key_is_named_with_its_path() -> None:
    found = problems({"gpu": {"count": 8, "model": "x", "countt": 9}})
    assert any(p.startswith("gpu.countt: unknown key") for p in found)


def test_wrong_types_are_named() -> None:
    found = problems({"gpu": {"count": "8", "model": "x", "ecc_required": 1},
                      "ib": {"counter_max": {"symbol_error": "lots"}}})
    assert "gpu.count: expected an integer, got str" in found
    assert "gpu.ecc_required: expected true/false, got int" in found
    assert "ib.counter_max.symbol_error: expected an integer, got str" in found


def test_missing_required_keys_are_named() -> None:
    assert "gpu: required key missing" in problems({})
    found = problems({**MINIMAL, "long": {"stress_tflops_floor": 700}})
    assert "long.membw_floor_gbps: required key missing" in found
    assert "long.allreduce_busbw_floor_gbps: required key missing" in found


def test_bad_regex_and_ranges_are_rejected() -> None:
    found = problems({**MINIMAL, "kernel_log": {"expected_patterns": ["ok", "("]},
                      "storage": {"disk_max_used_pct": 120}})
    assert any(p.startswith("kernel_log.expected_patterns[1]: not a regular expression") for p in found)
    assert "storage.disk_max_used_pct: must be in (0, 100]" in found


def test_unreadable_or_non_json_file(tmp_path: Path) -> None:
    bad = tmp_path / "c.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="not JSON"):
        load_config(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.json")


def test_schema_version_mismatch_is_refused() -> None:
    assert any("schema_version" in p for p in problems({**MINIMAL, "schema_version": 2}))


def test_top_level_must_be_an_object() -> None:
    assert problems(json.loads("[1, 2]")) == ["<top>: expected an object, got list"]
