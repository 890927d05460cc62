"""The whole demo, with credentials chosen to be easy to find: no byte the run produced holds one.

Every byte: the demo's stdout and stderr, every file under the site's directory afterwards (the state
database and its WAL, the site caches, the harvest exports, the lab's run directory with each
simulator's log, every test host's own files), and the command line of every process seen while the run went on (`/proc/*/cmdline`,
sampled every 20 ms). Each credential is looked for in the forms it travels in: as is, URL-encoded,
base64 of `user:password` (HTTP Basic), and each part of the MAAS key (OAuth sends them apart).
"""

from __future__ import annotations

import base64
import subprocess
from urllib.parse import quote, quote_plus

from tests.demo_run import BMC_PASSWORD, MAAS_KEY, DemoRun


def _forms() -> dict[str, bytes]:
    forms = {
        "bmc password": BMC_PASSWORD,
        "bmc password, URL-encoded": quote(BMC_PASSWORD, safe=""),
        "bmc password, form-encoded": quote_plus(BMC_PASSWORD),
        "Basic root:password": base64.b64encode(f"root:{BMC_PASSWORD}".encode()).decode(),
        "bmc password, base64": base64.b64encode(BMC_PASSWORD.encode()).decode(),
        "MAAS key": MAAS_KEY,
        "MAAS key, URL-encoded": quote(MAAS_KEY, safe=""),
    }
    for n, part in enumerate(MAAS_KEY.split(":")):
        forms[f"MAAS key part {n}"] = part
    return {name: form.encode() for name, form in forms.items()}


def _found(blob: bytes) -> list[str]:
    return [name for name, form in _forms().items() if form in blob]


def test_the_demo_leaves_no_credential_anywhere(demo_run: DemoRun) -> None:
    tmp_path, took = demo_run.root, demo_run.took_s
    out = subprocess.CompletedProcess([], demo_run.returncode, demo_run.stdout_bytes, demo_run.stderr_bytes)
    sampler = demo_run
    assert out.returncode == 0, (out.stdout[-2000:] + out.stderr[-2000:]).decode(errors="replace")
    assert b"golden" in out.stdout.lower() and sampler.samples > 10, "the demo ran and was watched"
    leaks = {f"stdout: {name}" for name in _found(out.stdout)} | {f"stderr: {name}" for name in _found(out.stderr)}
    files = [p for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(p.suffix == ".db" for p in files) and any(".site-cache" in p.parts for p in files)
    assert any(p.suffix == ".log" or "log" in p.name for p in files), sorted(str(p) for p in files)
    # the test hosts' own files too (each overlay's upper layer: what site.yml and the agent wrote there)
    assert any("upper" in p.parts and p.name == "health.json" for p in files), "the test hosts' files are searched"
    for path in files:
        leaks |= {f"{path.relative_to(tmp_path)}: {name}" for name in _found(path.read_bytes())}
    for cmdline in sampler.cmdlines:
        leaks |= {f"argv {cmdline[:120]!r}: {name}" for name in _found(cmdline)}
    assert sorted(leaks) == [], f"credentials found ({took:.0f} s run)"
