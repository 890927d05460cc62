"""Prometheus text exposition (format 0.0.4) for the node exporter's textfile collector, written atomically.

Every stage writes its own `.prom` file through `write_families`, into one directory: `$BRINGUP_METRICS_DIR`
when set (on a controller, the node exporter's `--collector.textfile.directory`), else `metrics/` beside the
state database in use. A file is written beside its target and renamed, so a scrape never reads half of it
(the health agent's writer, `tools/health/textfile.py`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tools.health.textfile import write_atomically  # the agent's: beside the target, then renamed

ENV_METRICS_DIR = "BRINGUP_METRICS_DIR"
METRICS_DIR_NAME = "metrics"
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_FILE = re.compile(r"[a-z0-9][a-z0-9_.-]*\.prom")
_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})


@dataclass(frozen=True)
class Sample:
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Family:
    """One metric family: its name, HELP text, TYPE (gauge or counter) and samples."""

    name: str
    help: str
    samples: Sequence[Sample] = field(default_factory=tuple)
    type: str = "gauge"

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name) or self.type not in ("gauge", "counter"):
            raise ValueError(f"not a metric family: {self.name!r} ({self.type})")
        for sample in self.samples:
            bad = [k for k in sample.labels if not _LABEL.fullmatch(k) or k.startswith("__")]
            if bad:
                raise ValueError(f"{self.name}: invalid label name(s) {bad}")


def gauge(name: str, help_text: str, rows: Iterable[tuple[Mapping[str, str], float]]) -> Family:
    return Family(name, help_text, tuple(Sample(dict(labels), value) for labels, value in rows))


def _value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v)) if not float(v).is_integer() else str(int(v))


def render(families: Iterable[Family]) -> str:
    lines: list[str] = []
    for fam in families:
        lines += [f"# HELP {fam.name} {fam.help.translate(_ESCAPES)}", f"# TYPE {fam.name} {fam.type}"]
        for s in fam.samples:
            labels = ",".join(f'{k}="{str(v).translate(_ESCAPES)}"' for k, v in sorted(s.labels.items()))
            lines.append(f"{fam.name}{{{labels}}} {_value(s.value)}" if labels else f"{fam.name} {_value(s.value)}")
    return "\n".join(lines) + "\n"


def metrics_dir(state_db: Path, environ: Mapping[str, str] | None = None) -> Path:
    """`$BRINGUP_METRICS_DIR`, else `metrics/` beside the state database."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_METRICS_DIR)
    return Path(value) if value else state_db.parent / METRICS_DIR_NAME


def write_families(directory: Path, filename: str, families: Iterable[Family]) -> Path:
    """Render `families` into `directory/filename` (a `*.prom` name the collector reads), atomically."""
    if not _FILE.fullmatch(filename):
        raise ValueError(f"not a textfile collector file name: {filename!r}")
    path = directory / filename
    write_atomically(path, render(families))
    return path


def file_slug(text: str) -> str:
    """A stage or command name as part of a file name (`maas-deploy` -> `maas_deploy`)."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "stage"
