"""Resolve credential references to secrets, at the moment they are needed and nowhere else.

A `Secret` never shows its value in `repr`/`str`, so it cannot leak into logs, exceptions or reports
by accident; call `reveal()` at the one place that sends it (an HTTP auth header, an SSH login).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from provision.errors import CredentialError
from provision.site.model import Credential, CredentialRef, Site


@dataclass(frozen=True)
class Secret:
    _value: str = field(repr=False)

    def reveal(self) -> str:
        return self._value

    def __str__(self) -> str:
        return "********"

    def __repr__(self) -> str:
        return "Secret(********)"


@dataclass(frozen=True)
class Login:
    username: str
    password: Secret


def _from_vault(ref: CredentialRef, base: Path) -> Secret:
    assert ref.vault is not None and ref.key is not None
    vault = base / ref.vault
    if "ANSIBLE_VAULT_PASSWORD_FILE" not in os.environ:
        raise CredentialError(
            f"{ref.vault}: set ANSIBLE_VAULT_PASSWORD_FILE to read the vault (the password is never asked on argv)"
        )
    try:
        # ansible-vault reads its password from the file named by the environment variable.
        result = subprocess.run(
            ["ansible-vault", "view", str(vault)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except FileNotFoundError:
        raise CredentialError("ansible-vault is not installed: cannot read vault credentials") from None
    if result.returncode != 0:
        raise CredentialError(f"{ref.vault}: ansible-vault could not decrypt it (wrong vault password?)")
    data = yaml.safe_load(result.stdout)
    if not isinstance(data, dict) or ref.key not in data:
        raise CredentialError(f"{ref.vault}: no entry {ref.key!r}")
    return Secret(str(data[ref.key]))


def resolve(ref: CredentialRef, base: Path) -> Secret:
    """The secret a reference points to; `base` is the site file's directory."""
    if ref.env is not None:
        value = os.environ.get(ref.env)
        if value is None or value == "":
            raise CredentialError(f"environment variable {ref.env} is not set")
        return Secret(value)
    return _from_vault(ref, base)


def login(site: Site, credential_name: str) -> Login:
    cred: Credential | None = site.spec.credentials.get(credential_name)
    if cred is None:
        raise CredentialError(f"no credential named {credential_name!r} in the site file")
    return Login(cred.username, resolve(cred.password, site.directory))
