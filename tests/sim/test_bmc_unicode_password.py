"""The simulated BMC compares credentials of any characters (issue 16: a non-ASCII password crashed it, since
hmac.compare_digest refuses a str that is not ASCII)."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest

from provision.site import load_site
from sim.redfish.bmc import Settings, SimBmc
from sim.redfish.http import Request, Response
from sim.redfish.identity import identity
from tests.redfish.simlab import write_site

PASSWORD = "pässwörd-日本-\u00e9\u0301"


def _bmc(tmp_path: Path) -> SimBmc:
    site = load_site(write_site(tmp_path, 1, 8443))
    return SimBmc(identity(site, site.hosts()[0]), "root", PASSWORD, Settings(power_delay_s=0.0))


def _get(bmc: SimBmc, user: str, password: str) -> int:
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    resp = asyncio.run(bmc.handle(Request("GET", "/redfish/v1/Systems", {"authorization": f"Basic {basic}"}, b"")))
    assert isinstance(resp, Response)
    return resp.status


def _login(bmc: SimBmc, user: str, password: str) -> int:
    body = json.dumps({"UserName": user, "Password": password}).encode()
    resp = asyncio.run(bmc.handle(Request("POST", "/redfish/v1/SessionService/Sessions", {}, body)))
    assert isinstance(resp, Response)
    return resp.status


@pytest.mark.parametrize("attempt", [PASSWORD, "wrong-ascii", "wröng", "\udcff"])
def test_basic_and_session_auth_with_non_ascii_passwords(tmp_path: Path, attempt: str) -> None:
    bmc = _bmc(tmp_path)
    expected_ok = attempt == PASSWORD
    if "\udcff" not in attempt:  # a lone surrogate cannot be sent as Basic (no UTF-8 for it)
        assert _get(bmc, "root", attempt) == (200 if expected_ok else 401)
    assert _login(bmc, "root", attempt) in ((200, 201) if expected_ok else (401,))
    assert _login(bmc, "rööt", attempt) == 401
