"""Credential references resolve from the environment and never show the secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.errors import CredentialError
from provision.site import load_site
from provision.site.credentials import Secret, login, resolve
from provision.site.model import CredentialRef

REPO = Path(__file__).resolve().parents[2]


def test_env_reference_resolves_and_hides_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRINGUP_SIM_BMC_PASSWORD", "s3cret-value")
    site = load_site(REPO / "inventory" / "sim")
    cred = login(site, "bmc-default")
    assert cred.username == "root"
    assert cred.password.reveal() == "s3cret-value"
    assert "s3cret-value" not in repr(cred) and "s3cret-value" not in str(cred.password)


def test_unset_variable_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE_NOT_SET", raising=False)
    with pytest.raises(CredentialError, match="environment variable NOPE_NOT_SET is not set"):
        resolve(CredentialRef(env="NOPE_NOT_SET"), Path("."))


def test_vault_needs_a_password_file_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ANSIBLE_VAULT_PASSWORD_FILE", raising=False)
    (tmp_path / "v.yml").write_text("x")
    with pytest.raises(CredentialError, match="ANSIBLE_VAULT_PASSWORD_FILE"):
        resolve(CredentialRef(vault="v.yml", key="k"), tmp_path)


def test_secret_repr_is_masked() -> None:
    assert repr(Secret("abc")) == "Secret(********)"
