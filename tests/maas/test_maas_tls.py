"""The MAAS region's certificate is checked as the BMCs' are: verified by default, against the site's CA
bundle when it names one, not at all when the site opts out (the opt-out wins over a bundle)."""

from __future__ import annotations

import ssl
from pathlib import Path
from types import SimpleNamespace

import pytest

from provision.cli.maas_cmds import _tls
from provision.errors import BringupError
from provision.site import load_site
from provision.site.tls import tls_context
from sim.redfish.tlscert import make_certificates
from tests.sites import copy_sim_site


def _maas_settings(tmp_path: Path, extra: str) -> tuple[SimpleNamespace, object]:
    site_file = copy_sim_site(tmp_path / "site")
    site_file.write_text(site_file.read_text().replace("maas:\n", f"maas:\n{extra}", 1))
    site = load_site(site_file)
    return SimpleNamespace(site=site), site.spec.maas


def test_the_default_verifies_against_the_system_trust_store(tmp_path: Path) -> None:
    ctx, maas = _maas_settings(tmp_path, "")
    context = _tls(ctx, maas)  # type: ignore[arg-type]
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert context is tls_context(True, service="BMC")  # the one shared context, as the BMCs' and UFM's


def test_a_ca_bundle_replaces_the_system_trust_store(tmp_path: Path) -> None:
    ca_path, _, _ = make_certificates(tmp_path / "certs", ["127.0.2.1"], "ecdsa")
    ctx, maas = _maas_settings(tmp_path, f"  ca_bundle: {ca_path}\n")
    context = _tls(ctx, maas)  # type: ignore[arg-type]
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert len(context.get_ca_certs()) == 1


def test_the_opt_out_wins_over_a_bundle(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("not read")
    ctx, maas = _maas_settings(tmp_path, f"  verify_tls: false\n  ca_bundle: {tmp_path / 'ca.pem'}\n")
    context = _tls(ctx, maas)  # type: ignore[arg-type]
    assert context.verify_mode is ssl.CERT_NONE and not context.check_hostname


def test_an_unreadable_bundle_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("not a certificate")
    ctx, maas = _maas_settings(tmp_path, f"  ca_bundle: {tmp_path / 'ca.pem'}\n")
    with pytest.raises(BringupError, match="cannot load the MAAS CA bundle"):
        _tls(ctx, maas)  # type: ignore[arg-type]
