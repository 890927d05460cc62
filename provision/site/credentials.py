"""Resolve credential references to secrets, at the moment they are needed and nowhere else.

A `Secret` never shows its value in `repr`/`str`, so it cannot leak into logs, exceptions or reports
by accident; call `reveal()` at the one place that sends it (an HTTP auth header, an SSH login).
Every `Secret` and `Login` made is held by `provision.state.secret_values` (the value, its encodings,
base64 of `user:password`), so that a peer echoing it back is masked wherever its answer is written.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from provision.errors import CredentialError
from provision.site.bounded import InputRefused, load_yaml
from provision.site.model import Credential, CredentialRef, Site
from provision.state.secret_values import hold


@dataclass(frozen=True)
class Secret:
    _value: str = field(repr=False)

    def __post_init__(self) -> None:
        hold(self._value)

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

    def __post_init__(self) -> None:
        hold(self.password.reveal(), username=self.username)  # HTTP Basic sends base64 of user:password


MAX_VAULT_BYTES = 1024 * 1024  # a vault of credentials, encrypted
MAX_VAULT_NODES = 100_000
# Decrypted vaults by (path, mtime, size): a site's hosts share a few credentials, and each
# ansible-vault run costs about half a second (a fan-out over 500 hosts would pay it per host).
_VAULTS: dict[tuple[Path, int, int], dict[str, Any]] = {}


def _ansible_vault() -> str | None:
    # The venv's own copy first: `.venv/bin/provision` is often run without the venv on PATH.
    beside = Path(sys.executable).parent / "ansible-vault"
    return str(beside) if beside.is_file() else shutil.which("ansible-vault")


def _decrypt(vault: Path, name: str) -> dict[str, Any]:
    try:
        st = vault.stat()
    except OSError as exc:
        raise CredentialError(f"{name}: cannot read the vault ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_VAULT_BYTES:
        raise CredentialError(f"{name}: the vault {vault} is not a regular file of at most {MAX_VAULT_BYTES} bytes")
    key = (vault.resolve(), st.st_mtime_ns, st.st_size)
    if key in _VAULTS:
        return _VAULTS[key]
    tool = _ansible_vault()
    if tool is None:
        raise CredentialError("ansible-vault is not installed: cannot read vault credentials")
    try:
        # ansible-vault reads its password from the file named by ANSIBLE_VAULT_PASSWORD_FILE.
        result = subprocess.run([tool, "view", str(vault)], capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        raise CredentialError(f"{name}: ansible-vault did not finish within 60 s") from None
    except OSError as exc:  # not executable, a stale shebang after the venv moved...
        raise CredentialError(f"{name}: ansible-vault ({tool}) could not be run: {exc.strerror or exc}") from None
    if result.returncode != 0:
        raise CredentialError(f"{name}: ansible-vault could not decrypt it (wrong vault password?)")
    # Parsed outside any `except` so that no YAML error, whose message quotes the offending line of
    # the decrypted text, is chained to what we raise.
    data: Any = None
    parsed = True
    try:
        data = load_yaml(result.stdout, max_nodes=MAX_VAULT_NODES)
    except (yaml.YAMLError, InputRefused):
        parsed = False
    if not parsed or not isinstance(data, dict):
        raise CredentialError(f"{name}: the decrypted vault is not a YAML mapping of names to secrets")
    _VAULTS[key] = data
    return data


def _from_vault(ref: CredentialRef, base: Path) -> Secret:
    assert ref.vault is not None and ref.key is not None
    if "ANSIBLE_VAULT_PASSWORD_FILE" not in os.environ:
        raise CredentialError(
            f"{ref.vault}: set ANSIBLE_VAULT_PASSWORD_FILE to read the vault (the password is never asked on argv)"
        )
    data = _decrypt(base / ref.vault, ref.vault)
    if ref.key not in data:
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
