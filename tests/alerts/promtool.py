"""`promtool test rules` driven from Python: input series from textfiles or literal samples, expected alerts
with their labels and annotations rendered from the rules file itself.

The rules' annotations use only `{{ $labels.NAME }}` (roles/prometheus_server/files/rules/bringup.rules.yml
says so); `annotations` renders exactly that and refuses any other template, so an expectation can never
silently disagree with what Prometheus would render.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "roles" / "prometheus_server" / "files" / "rules" / "bringup.rules.yml"
_LABEL_REF = re.compile(r"\{\{ \$labels\.([a-zA-Z_][a-zA-Z0-9_]*) \}\}")


@dataclass(frozen=True)
class Series:
    name: str
    labels: Mapping[str, str]
    values: str  # promtool's expanding notation: '1+0x60', '0 0 5 5'

    def text(self) -> str:
        inner = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(self.labels.items()) if v != "")
        return f"{self.name}{{{inner}}}"


Samples = list[tuple[str, dict[str, str], float]]


def parse(text: str) -> Samples:
    """Every sample of a text exposition, parsed by prometheus_client's text-format parser."""
    return [(s.name, dict(s.labels), s.value) for family in text_string_to_metric_families(text)
            for s in family.samples]


def read_textfiles(directory: Path) -> Samples:
    """Every sample of every `*.prom` file in `directory`."""
    return [row for path in sorted(directory.glob("*.prom")) for row in parse(path.read_text(encoding="utf-8"))]


def scraped(samples: Iterable[tuple[str, Mapping[str, str], float]], target: Mapping[str, str],
            minutes: int) -> list[Series]:
    """Each sample as the scrape of its target would store it, constant for `minutes`."""
    return [Series(name, {**labels, **target}, f"{value:g}+0x{minutes}") for name, labels, value in samples]


def rules() -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return {r["alert"]: r for g in doc["groups"] for r in g["rules"] if "alert" in r}


def rendered_annotations(rule: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for key, text in rule.get("annotations", {}).items():
        rendered = _LABEL_REF.sub(lambda m: labels.get(m.group(1), ""), text)
        if "{{" in rendered:
            raise ValueError(f"{rule['alert']}.{key}: only {{{{ $labels.NAME }}}} is rendered here: {text!r}")
        out[key] = rendered
    return out


def alert(name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """One expected alert: the expression's labels (empty ones dropped) plus the rule's, and its annotations."""
    rule = rules()[name]
    shown = {k: v for k, v in labels.items() if v != ""}
    return {"exp_labels": {**shown, **rule.get("labels", {})}, "exp_annotations": rendered_annotations(rule, shown)}


def expectations(eval_time: str, firing: Mapping[str, Sequence[Mapping[str, str]]],
                 silent_others: bool = True) -> list[dict[str, Any]]:
    """alert_rule_test entries at `eval_time`: exactly `firing` for the alerts named, none for every other."""
    names = rules() if silent_others else firing
    return [{"eval_time": eval_time, "alertname": n,
             "exp_alerts": sorted((alert(n, lb) for lb in firing.get(n, ())), key=json.dumps)} for n in names]


def run_promtool(tmp: Path, series: Sequence[Series], tests: Sequence[dict[str, Any]],
                 interval: str = "1m") -> subprocess.CompletedProcess[str]:
    doc = {"rule_files": [str(RULES)], "evaluation_interval": interval,
           "tests": [{"interval": interval,
                      "input_series": [{"series": s.text(), "values": s.values} for s in series],
                      "alert_rule_test": list(tests)}]}
    path = tmp / "alerts.test.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=60,
                          check=False)
