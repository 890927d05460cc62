"""Every credential a site file names, held for masking whether or not this process uses it.

Masking (`provision.state.secret_values`) knows the values it holds. Holding only what a command
resolved leaves the others open: `fabric ports apply` resolves the UFM login, yet a UFM event text may
quote a BMC password; `fabric ports list --db` resolves nothing, yet prints a ledger a run before it
filled with echoed text. So when a site is read (`load_site`, and `load_index`'s fast path), every
credential reference in it is resolved where that is possible and held:

- `{env: NAME}`: the variable's value, when it is set;
- `{vault: FILE, key: NAME}`: the vault entry, when `ANSIBLE_VAULT_PASSWORD_FILE` is set (decrypted
  once per vault and process by `provision.site.credentials`);
- beside a `username` (a login), also base64 of `user:password`; a MAAS `api_key`, also its three parts.

A reference that cannot be resolved is skipped without a word: the command that needs it says why.
Nothing here prints or returns a value. The walk reads the parsed document, not the validated model, so
`provision status` (which reads only the index) pays no pydantic import: a few milliseconds for a
511-host site.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from provision.state.secret_values import hold, hold_maas_key

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOST_LISTS = frozenset({"racks"})  # hosts name credentials by name, never hold a reference: not walked
# Vault entries that could not be read, by (path, mtime, size, key): each try runs ansible-vault (~0.5 s), and a site is
# read more than once in a process; an edited vault is tried again.
_UNREADABLE: set[tuple[str, int, int, str]] = set()


def _refs(node: Any, key: str | None = None, parent: Mapping[str, Any] | None = None,
          depth: int = 0) -> Iterator[tuple[dict[str, str], str | None, str | None]]:
    """(reference, its key, the username beside it) for every credential reference in the document."""
    if depth > 32:
        return
    if isinstance(node, Mapping):
        if _is_ref(node):
            username = parent.get("username") if parent is not None else None
            yield dict(node), key, username if isinstance(username, str) else None
            return
        for k, v in node.items():
            if not (depth == 0 and k in _HOST_LISTS):
                yield from _refs(v, str(k), node, depth + 1)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item, key, None, depth + 1)


def _is_ref(node: Mapping[str, Any]) -> bool:
    env, vault, ref_key = node.get("env"), node.get("vault"), node.get("key")
    if set(node) == {"env"}:
        return isinstance(env, str) and bool(_ENV_NAME.match(env))
    return set(node) == {"vault", "key"} and isinstance(vault, str) and isinstance(ref_key, str)


def _vault_value(ref: Mapping[str, str], directory: Path) -> str | None:
    if "ANSIBLE_VAULT_PASSWORD_FILE" not in os.environ:
        return None
    from provision.errors import BringupError
    from provision.site.credentials import resolve
    from provision.site.model import CredentialRef

    try:
        st = (directory / ref["vault"]).stat()
    except OSError:
        return None
    tried = (str(directory / ref["vault"]), st.st_mtime_ns, st.st_size, ref["key"])
    if tried in _UNREADABLE:
        return None
    try:
        return resolve(CredentialRef(vault=ref["vault"], key=ref["key"]), directory).reveal()
    except (BringupError, ValueError, OSError):
        _UNREADABLE.add(tried)
        return None


def hold_site_secrets(document: Any, directory: Path) -> int:
    """Hold every credential the parsed site `document` names that can be resolved here (`directory`: the
    site file's, where vaults are found); how many were."""
    held = 0
    for ref, key, username in _refs(document):
        value = os.environ.get(ref["env"]) if "env" in ref else _vault_value(ref, directory)
        if not value:
            continue
        if key == "api_key":
            hold_maas_key(value)
        else:
            hold(value, username=username if key == "password" else None)
        held += 1
    return held


def hold_site_file_secrets(site_file: Path | str) -> int:
    """`hold_site_secrets` for the site file at `site_file` (its parsed cache when there is one); 0 for a
    file that cannot be read or parsed (the command reading it says so)."""
    from provision.site.bounded import MAX_SITE_BYTES, read_text
    from provision.site.cache import PARSED, content_key, read_cached

    file = Path(site_file)
    try:
        text = read_text(file, limit=MAX_SITE_BYTES, what="site file")
        try:
            document = read_cached(file, content_key(text), PARSED)
        except (OSError, ValueError):
            from provision.site.bounded import load_yaml

            document = load_yaml(text)
    except Exception:  # unreadable or not YAML: nothing to hold, and not this function's to report
        return 0
    return hold_site_secrets(document, file.parent)


def hold_recorded_site_secrets(recorded: Mapping[str, str]) -> int:
    """`hold_site_file_secrets` for the site a state store records (`StateStore.recorded_site()`), when its
    file is still there: what a command given only `--db` masks."""
    site_file = recorded.get("site_file")
    return hold_site_file_secrets(site_file) if site_file and Path(site_file).is_file() else 0
