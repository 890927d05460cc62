"""Credential references resolve from the environment and never show the secret."""

from __future__ import annotations

import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest

from provision.errors import CredentialError
from provision.site import credentials, load_site
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


def _vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plaintext: str) -> Path:
    """A real ansible-vault file holding `plaintext`, its password file named in the environment."""
    tool = Path(sys.executable).parent / "ansible-vault"
    # ansible is a declared dependency (deps/python/ansible.txt): its absence is a broken install, not a skip.
    assert tool.is_file(), f"{tool} is missing: run ./bringup test, which installs deps/python/ansible.txt"
    password_file = tmp_path / "vault-pass"
    password_file.write_text("vault-test-password\n")
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(password_file))
    (tmp_path / "secrets.yml").write_text(plaintext)
    subprocess.run([str(tool), "encrypt", str(tmp_path / "secrets.yml")], check=True, capture_output=True)
    assert b"$ANSIBLE_VAULT" in (tmp_path / "secrets.yml").read_bytes()
    return tmp_path / "secrets.yml"


def test_vault_entries_resolve_with_one_ansible_vault_run_per_vault(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _vault(tmp_path, monkeypatch, "bmc_password: s3cr3t-bmc\nipmi_password: other\n")
    runs: list[list[str]] = []
    real_run = subprocess.run

    def counting_run(argv: list[str], **kwargs: Any) -> Any:
        runs.append(argv)
        return real_run(argv, **kwargs)

    monkeypatch.setattr(credentials.subprocess, "run", counting_run)
    for _ in range(3):
        assert resolve(CredentialRef(vault="secrets.yml", key="bmc_password"), tmp_path).reveal() == "s3cr3t-bmc"
    assert resolve(CredentialRef(vault="secrets.yml", key="ipmi_password"), tmp_path).reveal() == "other"
    assert len(runs) == 1
    with pytest.raises(CredentialError, match="no entry 'nope'"):
        resolve(CredentialRef(vault="secrets.yml", key="nope"), tmp_path)


def test_a_vault_that_is_not_yaml_is_an_error_that_quotes_none_of_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # PyYAML's own message would quote the offending line, password and all.
    _vault(tmp_path, monkeypatch, "bmc_password: s3cr3t-bmc: oops\n")
    with pytest.raises(CredentialError) as caught:
        resolve(CredentialRef(vault="secrets.yml", key="bmc_password"), tmp_path)
    text = "".join(traceback.format_exception(caught.value))
    assert "not a YAML mapping" in text
    assert "s3cr3t" not in text and caught.value.__context__ is None and caught.value.__cause__ is None


def test_a_wrong_vault_password_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _vault(tmp_path, monkeypatch, "bmc_password: s3cr3t-bmc\n")
    (tmp_path / "vault-pass").write_text("not-the-password\n")
    with pytest.raises(CredentialError, match="could not decrypt it"):
        resolve(CredentialRef(vault="secrets.yml", key="bmc_password"), tmp_path)


def test_an_ansible_vault_that_cannot_run_is_a_credential_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    broken = tmp_path / "ansible-vault"
    broken.write_text("#!/nonexistent/python\n")  # a venv moved after install: its shebang points nowhere
    broken.chmod(0o755)
    monkeypatch.setattr(credentials, "_ansible_vault", lambda: str(broken))
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(tmp_path / "pass"))
    (tmp_path / "secrets.yml").write_text("$ANSIBLE_VAULT;1.1;AES256\n00\n")
    with pytest.raises(CredentialError, match="could not be run"):
        resolve(CredentialRef(vault="secrets.yml", key="k"), tmp_path)
