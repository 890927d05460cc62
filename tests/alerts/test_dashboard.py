"""The Grafana dashboard (roles/prometheus_server/files/dashboards/bringup.json) against Grafana's dashboard
schema, as Grafana Labs' Foundation SDK generates it for Grafana 11.6 (deps/python/monitoring.txt): the JSON
decodes into the schema's types and encodes back without losing or changing anything (a field the schema does
not know is dropped by the decoder, so it shows as lost), every panel is a kind the schema registers, every
query is a Prometheus query, and every query parses as PromQL (promtool). No Grafana runs here."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from grafana_foundation_sdk.cog import plugins, runtime
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import prometheus
from grafana_foundation_sdk.models.dashboard import Dashboard, Panel, RowPanel

from tests.alerts.promtool import REPO, RULES

DASHBOARD = REPO / "roles" / "prometheus_server" / "files" / "dashboards" / "bringup.json"
_OURS = re.compile(r"\b(bringup_[a-z_]+|DCGM_FI_DEV_[A-Z_]+|node_infiniband_[a-z_]+|training_[a-z_]+)\b")


def lost(original: Any, again: Any, path: str = "$") -> list[str]:
    """What of `original` is missing or different in `again` (which may add the schema's defaults)."""
    if isinstance(original, dict):
        if not isinstance(again, dict):
            return [f"{path}: became {type(again).__name__}"]
        return [p for k, v in original.items()
                for p in ([f"{path}.{k}: not in the schema"] if k not in again else lost(v, again[k], f"{path}.{k}"))]
    if isinstance(original, list):
        if not isinstance(again, list) or len(again) != len(original):
            return [f"{path}: list changed"]
        return [p for i, (a, b) in enumerate(zip(original, again, strict=True)) for p in lost(a, b, f"{path}[{i}]")]
    return [] if original == again else [f"{path}: {original!r} became {again!r}"]


@pytest.fixture(scope="module")
def dashboard() -> tuple[dict[str, Any], Dashboard]:
    plugins.register_default_plugins()
    data = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data, Dashboard.from_json(data)


def test_the_dashboard_round_trips_through_grafanas_schema_types_unchanged(
        dashboard: tuple[dict[str, Any], Dashboard]) -> None:
    data, decoded = dashboard
    assert lost(data, json.loads(json.dumps(decoded, cls=JSONEncoder))) == []


def test_a_field_the_schema_does_not_know_is_caught() -> None:
    plugins.register_default_plugins()
    data = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    data["panels"][1]["gridPoss"] = data["panels"][1]["gridPos"]
    data["refreshh"] = "1m"
    assert sorted(lost(data, json.loads(json.dumps(Dashboard.from_json(data), cls=JSONEncoder)))) == [
        "$.panels[1].gridPoss: not in the schema", "$.refreshh: not in the schema"]


def test_every_panel_is_a_registered_kind_and_every_query_a_prometheus_one(
        dashboard: tuple[dict[str, Any], Dashboard]) -> None:
    _data, decoded = dashboard
    every = decoded.panels or []
    panels = [p for p in every if isinstance(p, Panel)]
    assert panels and all(isinstance(p, Panel | RowPanel) for p in every)
    assert [p.type_val for p in panels if runtime.panelcfg_config(p.type_val) is None] == []
    queries = [t for p in panels for t in p.targets or []]
    assert queries and all(isinstance(t, prometheus.Dataquery) for t in queries)


@pytest.mark.tools("promtool")
def test_every_query_parses_as_promql_and_the_dashboard_shows_every_metric_the_rules_read(
        dashboard: tuple[dict[str, Any], Dashboard], tmp_path: Path) -> None:
    data, _decoded = dashboard
    exprs = [(p["id"], t["refId"], t["expr"]) for p in data["panels"] for t in p.get("targets", [])]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:panel{pid}_{ref}", "expr": e}
                                                         for pid, ref, e in exprs]}]}
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    done = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = {m for _p, _r, e in exprs for m in _OURS.findall(e)}
    read = set(_OURS.findall(RULES.read_text(encoding="utf-8")))
    assert sorted(read - shown) == []
