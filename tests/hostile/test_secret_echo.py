"""A BMC or MAAS whose 401 answer echoes the request: no credential reaches output, evidence or errors.

The peers (tests/hostile/echo_peers.py) quote everything they were sent, the Basic header, the
session login body and the OAuth header, as their error message. The commands report and record
that message; each credential, in each encoding it travelled in, must be masked everywhere.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
import yaml

from provision.cli import main
from provision.command import output
from tests.hostile.echo_peers import echo_peer
from tests.sites import copy_sim_site

PASSWORD = "Echo+Me/Pass=w0rd&%"
MAAS_KEY = "EchoConsumerKey01:EchoTokenKey00002:EchoTokenSecret000000000000003"


def bmc_forms() -> list[str]:
    return [PASSWORD, quote(PASSWORD, safe=""), quote_plus(PASSWORD),
            base64.b64encode(f"root:{PASSWORD}".encode()).decode()]


def maas_forms() -> list[str]:
    return [MAAS_KEY, *MAAS_KEY.split(":"), "%26" + MAAS_KEY.split(":")[2]]


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("BRINGUP_SIM_BMC_PASSWORD", PASSWORD)
    monkeypatch.setenv("BRINGUP_SIM_MAAS_API_KEY", MAAS_KEY)
    monkeypatch.setenv("COLUMNS", "60")  # narrow: rich folds long cells across lines
    for name in ("BRINGUP_STATE_DB", "BRINGUP_SITE"):
        monkeypatch.delenv(name, raising=False)
    output._console.cache_clear()
    output.get_console.cache_clear()
    yield
    output._console.cache_clear()
    output.get_console.cache_clear()


def _site(tmp_path: Path, bmc_port: int, maas_port: int) -> Path:
    site = copy_sim_site(tmp_path / "sim")
    data = yaml.safe_load(site.read_text())
    data["maas"]["url"] = f"http://127.0.0.1:{maas_port}/MAAS/"
    rack = data["racks"][0]
    host = rack["hosts"][0]
    host["bmc"] = {"address": "127.0.0.1", "port": bmc_port, "credential": "bmc-default"}
    rack["hosts"] = [host]
    data["racks"] = [rack]
    data.pop("fabric", None)
    data.pop("slurm", None)  # its controller is no host of this one-host site
    site.write_text(yaml.safe_dump(data))
    return site


def _leaks(text: str, forms: list[str]) -> list[str]:
    return [form for form in forms if form in text]


@pytest.mark.parametrize("auth", ["basic", "session"])
def test_an_echoing_bmc_leaks_no_credential(tmp_path: Path, capsys: pytest.CaptureFixture[str], auth: str) -> None:
    with echo_peer(tmp_path / "certs", sessions=auth == "session") as bmc, echo_peer() as maas:
        site = _site(tmp_path, bmc.server_address[1], maas.server_address[1])
        db = tmp_path / "state.db"
        for extra in ([], ["--json"]):
            code = main(["harvest-macs", "--site", str(site), "--db", str(db), "--auth", auth, "--retries", "0",
                         *extra])
            out, err = capsys.readouterr()
            assert code == 2, out + err
            assert "gpu-r1-01" in out + err
            assert _leaks(out + err, bmc_forms()) == []
        echoed = " ".join(bmc.seen)
    assert _leaks(echoed, bmc_forms()[:1] if auth == "session" else bmc_forms()[3:]), "the peer must have echoed it"
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("state.db*"))
    assert b"unauthorized: you sent" in stored or "unauthorized" in out, "the echo is recorded as evidence"
    assert [f for f in bmc_forms() if f.encode() in stored] == []
    assert code == 2


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_an_echoing_maas_leaks_no_part_of_the_api_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       extra: list[str]) -> None:
    with echo_peer(tmp_path / "certs") as bmc, echo_peer() as maas:
        site = _site(tmp_path, bmc.server_address[1], maas.server_address[1])
        code = main(["maas", "machines", "--site", str(site), "--db", str(tmp_path / "s.db"), *extra])
        out, err = capsys.readouterr()
        echoed = " ".join(maas.seen)
    assert code == 1
    assert "unauthorized" in out + err or "401" in out + err or "auth" in (out + err).lower(), out + err
    assert _leaks(echoed, maas_forms()[1:]), "the peer must have echoed the OAuth header"
    assert _leaks(out + err, maas_forms()) == []
