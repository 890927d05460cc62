"""BMC certificates are verified by default: a site's CA bundle makes the simulator's certificate
trusted; without it the handshake fails as `bmc_tls`; `verify: false` is an explicit opt-out."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

from provision.bmc import HarvestStep, RunOptions
from provision.redfish import ClientOptions
from provision.site import load_site
from provision.state import State, StateStore
from tests.redfish.simlab import PASSWORD_VAR, SimProcess, free_port, new_password, write_site


def harvest(site_path: Path, db: Path, *, lean_transport: bool = True) -> StateStore:
    site = load_site(site_path)
    store = StateStore(db)
    store.sync_site((h.hostname, h.rack) for h in site.hosts())
    options = RunOptions(client=ClientOptions(lean_transport=lean_transport))
    asyncio.run(HarvestStep(site, store, options).run(site.hosts()))
    return store


# Both transports: the lean one-connection transport (the default) and httpx's pooled one (the fallback).
@pytest.mark.parametrize("lean", [True, False], ids=["lean-transport", "httpx-transport"])
def test_ca_bundle_verification_and_opt_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lean: bool) -> None:
    password = new_password()
    monkeypatch.setenv(PASSWORD_VAR, password)
    port = free_port()
    served = write_site(tmp_path / "served", 1, port)
    with SimProcess(served, password, tmp_path / "run") as sim:
        trusted_dir = tmp_path / "trusted"
        trusted_dir.mkdir()
        shutil.copy(sim.ca, trusted_dir / "bmc-ca.pem")
        trusted = write_site(trusted_dir, 1, port, tls="verify: true, ca_bundle: bmc-ca.pem")
        assert harvest(trusted, tmp_path / "a.db", lean_transport=lean).get("h000").state is State.macs_harvested

        strict = write_site(tmp_path / "strict", 1, port, tls="verify: true")
        rec = harvest(strict, tmp_path / "b.db", lean_transport=lean).get("h000")
        assert rec.state is State.failed and rec.reason == "bmc_tls"
        assert "CERTIFICATE_VERIFY_FAILED" in rec.evidence["detail"]

        assert harvest(served, tmp_path / "c.db", lean_transport=lean).get("h000").state is State.macs_harvested  # verify: false


def test_an_rsa_certificate_is_verified_and_harvested_like_an_ecdsa_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    password = new_password()
    monkeypatch.setenv(PASSWORD_VAR, password)
    port = free_port()
    served = write_site(tmp_path / "served", 1, port)
    with SimProcess(served, password, tmp_path / "run", cert_key="rsa") as sim:
        assert isinstance(x509.load_pem_x509_certificate(sim.ca.read_bytes()).public_key(), rsa.RSAPublicKey)
        trusted_dir = tmp_path / "trusted"
        trusted_dir.mkdir()
        shutil.copy(sim.ca, trusted_dir / "bmc-ca.pem")
        trusted = write_site(trusted_dir, 1, port, tls="verify: true, ca_bundle: bmc-ca.pem")
        assert harvest(trusted, tmp_path / "a.db").get("h000").state is State.macs_harvested
        assert harvest(served, tmp_path / "b.db").get("h000").state is State.macs_harvested  # verify: false
