"""The UFM credential travels only as the site says (an environment variable here) and into UFM's auth
header: `fabric ports apply --apply` on the ibsim fabric through a (hostile, then healthy) UFM, and the
password and base64 of `user:password` are in no argv of any process it starts (/proc/*/cmdline, sampled
while it runs), not in its output or errors, and not in the state database (port ledger included)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabric.design import Design
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from sim.ibfabric import IbFabric
from sim.lifetime import descendants
from sim.ufm.fabricview import SimEvent
from tests.fabric.ports.fakeufm import UfmState, fake_ufm
from tests.sites import copy_sim_site

pytestmark = pytest.mark.tools("ibsim", "opensm")
REPO = Path(__file__).resolve().parents[3]
PASSWORD = "Ufm-s3cret-4-grep"
LEAF, SPINE = "0c42a10300000000", "0c42a10300000080"


@pytest.fixture(scope="module")
def fabric(sim_design: Design, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IbFabric, Path]]:
    state = tmp_path_factory.mktemp("ib") / "ibfabric.json"
    with IbFabric(sim_design, state_file=state) as f:
        yield f, state


def _run(argv: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], list[bytes]]:
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[bytes] = []
    while proc.poll() is None:
        for pid in (proc.pid, *descendants(proc.pid)):
            try:
                seen.append(Path(f"/proc/{pid}/cmdline").read_bytes())
            except OSError:
                continue
        time.sleep(0.02)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), seen


def _events(text: str) -> list[dict[str, object]]:
    top = parse_ibnetdiscover(text)
    port, far = next((p, far) for p, far in top.adjacency[LEAF] if far.guid == SPINE)
    return [SimEvent(1, 329, "Link went down", "Link", f"{LEAF}_{port}:{SPINE}_{far.port}",
                     f"default(1) / Link: Source {LEAF}_{port}  TO Dest: {SPINE}_{far.port}",
                     "Warning", "Fabric_Topology", "Link went down").to_rest()]


def test_the_ufm_password_is_nowhere_but_the_auth_header(fabric: tuple[IbFabric, Path], tmp_path: Path) -> None:
    ib, state_file = fabric
    site = copy_sim_site(tmp_path / "sim")
    ufm = UfmState("admin", PASSWORD, events=_events(ib.discover()), fault="401", fail_after=1, delay_s=0.05)
    db = tmp_path / "state.db"
    secrets = [PASSWORD.encode(), base64.b64encode(f"admin:{PASSWORD}".encode())]
    with fake_ufm(ufm) as url:
        text = site.read_text().replace("https://127.0.2.2:8443/", url + "/")
        assert url in text
        site.write_text(text)
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")},
               "BRINGUP_SIM_UFM_PASSWORD": PASSWORD, "BRINGUP_IB_DIAGS": str(state_file)}
        argv = [sys.executable, "-c", "import sys; from fabric.cli import main; sys.exit(main())", "ports", "apply",
                "--site", str(site), "--db", str(db), "--apply",
                "--tickets"]
        failed, seen_failed = _run(argv, env)
        ufm.heal()
        done, seen_done = _run(argv, env)
    assert failed.returncode == 1 and "UFM refused the credential (HTTP 401)" in failed.stdout, failed
    assert done.returncode == 0 and "disabled         0x" in done.stdout, done.stdout + done.stderr
    assert len(ufm.actions) == 2 and seen_failed and seen_done
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("state.db*"))
    assert b"port_ledger" in stored and b"apply_failed" in stored
    for where, blob in [("argv", b"\n".join(seen_failed + seen_done)), ("state db", stored),
                        ("output", "".join([failed.stdout, failed.stderr, done.stdout, done.stderr]).encode())]:
        for secret in secrets:
            assert secret not in blob, f"the UFM credential is in the {where}"
