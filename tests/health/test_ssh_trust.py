"""Host keys and client keys: trust on first use pins keys, a changed key or a wrong client key is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncssh

from provision.health.run import check_hosts
from provision.health.verdict import Verdict
from provision.ssh import ENV_KEY_FILE, ENV_KNOWN_HOSTS, SshSettings, TrustOnFirstUse
from sim.sshhosts.harness import SshLab
from tests.health.conftest import needs_replay

pytestmark = needs_replay


def _check(sim: Any, env: dict[str, str], n: int = 3) -> dict[str, tuple[Verdict, str | None]]:
    settings = SshSettings.from_site(sim.site, env)
    results = asyncio.run(check_hosts(sim.site, sim.site.hosts()[:n], "fast", settings, concurrency=4, timeout_s=20))
    return {r.host: (r.verdict, r.reason) for r in results}


def test_trust_on_first_use_pins_keys_and_refuses_a_changed_one(sim_site_factory: Any, tmp_path: Path) -> None:
    sim = sim_site_factory(3, {})
    env = {k: v for k, v in sim.env.items() if k != ENV_KNOWN_HOSTS}  # the site names no known_hosts file
    assert {v for v in _check(sim, env).values()} == {(Verdict.healthy, None)}
    pinned = sim.directory / "state" / "simtest.known_hosts"
    assert len(pinned.read_text().splitlines()) == 3

    # The same hosts come back on the same addresses with new keys (a new lab run): every one is refused.
    sim.lab.__exit__(None, None, None)
    lab = SshLab(sim.directory / "site.yml", sim.directory / "health-faults.yml", tmp_path / "again", port=sim.lab.port)
    with lab:
        env = {k: v for k, v in lab.env.items() if k != ENV_KNOWN_HOSTS}
        assert set(_check(sim, env).values()) == {(Verdict.unknown, "ssh_host_key_mismatch")}


def test_a_client_key_the_hosts_do_not_know_is_refused(sim_site_factory: Any, tmp_path: Path) -> None:
    sim = sim_site_factory(2, {})
    stranger = tmp_path / "stranger"
    stranger.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
    stranger.chmod(0o600)
    assert set(_check(sim, {**sim.env, ENV_KEY_FILE: str(stranger)}, n=2).values()) == {
        (Verdict.unknown, "ssh_auth_failed")
    }


def test_tofu_file_survives_a_restart(tmp_path: Path) -> None:
    from provision.ssh import Endpoint
    from provision.ssh.errors import SshHostKeyMismatch

    endpoint = Endpoint("h1", "127.0.32.1", 2222, "root")
    TrustOnFirstUse(tmp_path / "k").check(endpoint, "ssh-ed25519 AAAA1")
    again = TrustOnFirstUse(tmp_path / "k")
    again.check(endpoint, "ssh-ed25519 AAAA1")
    try:
        again.check(endpoint, "ssh-ed25519 BBBB2")
    except SshHostKeyMismatch as exc:
        assert "changed since first use" in str(exc)
    else:
        raise AssertionError("a changed key was accepted")
