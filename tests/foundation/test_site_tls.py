"""TLS to the site's services is built in one place (`provision/site/tls.py`): verified unless the site opts out
(the opt-out wins over a bundle), against the site's CA bundle when it names one, one shared context per
setting, and an unloadable bundle is one error naming the service."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import pytest

from provision.errors import BringupError
from provision.site.tls import CaBundleError, tls_context
from sim.redfish.tlscert import make_certificates

REPO = Path(__file__).resolve().parents[2]
BUILDS_A_CONTEXT = re.compile(r"create_default_context\(|SSLContext\(")


def test_verification_is_on_by_default_and_the_context_is_shared() -> None:
    ctx = tls_context(True, service="BMC")
    assert ctx.verify_mode is ssl.CERT_REQUIRED and ctx.check_hostname
    assert tls_context(True, None, service="UFM") is ctx


def test_the_opt_out_verifies_nothing_and_wins_over_a_bundle(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("never read")
    ctx = tls_context(False, tmp_path / "ca.pem", service="UFM")
    assert ctx.verify_mode is ssl.CERT_NONE and not ctx.check_hostname


def test_a_ca_bundle_replaces_the_system_trust_store(tmp_path: Path) -> None:
    ca_path, _, _ = make_certificates(tmp_path / "certs", ["127.0.2.1"], "ecdsa")
    ctx = tls_context(True, ca_path, service="UFM")
    assert ctx.verify_mode is ssl.CERT_REQUIRED and len(ctx.get_ca_certs()) == 1


def test_an_unloadable_bundle_is_one_error_naming_the_service(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("not a certificate")
    with pytest.raises(CaBundleError, match=r"cannot load the UFM CA bundle .*ca\.pem") as info:
        tls_context(True, tmp_path / "ca.pem", service="UFM")
    assert isinstance(info.value, BringupError)
    with pytest.raises(CaBundleError, match=r"cannot load the BMC CA bundle .*missing\.pem"):
        tls_context(True, str(tmp_path / "missing.pem"), service="BMC")


def test_no_other_product_module_builds_a_tls_context() -> None:
    found = [f"{rel}:{no}" for path in sorted(p for top in ("provision", "fabric", "report", "training", "tools")
                                               for p in (REPO / top).rglob("*.py"))
             if (rel := path.relative_to(REPO).as_posix()) != "provision/site/tls.py"
             for no, line in enumerate(path.read_text().splitlines(), 1) if BUILDS_A_CONTEXT.search(line)]
    assert not found, "build it with provision.site.tls.tls_context instead: " + ", ".join(found)
