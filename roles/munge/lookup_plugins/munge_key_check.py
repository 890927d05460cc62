"""`lookup('munge_key_check', PATH, min_bytes=32, max_bytes=1024)`: what is wrong with the MUNGE key file on the
controller, as one message ("" when nothing is).

The key is a secret: this returns the file's problems (missing, not a regular file, readable by group or others,
too short or too long), never any of its bytes. An ansible-vault file is decrypted by Ansible's loader (the run's
vault secrets) into a private temporary file only to count its bytes; its own mode is not judged (its content is
encrypted at rest). The checks are `key_problem`, a plain function the role's tests call.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from ansible.errors import AnsibleError  # type: ignore[import-untyped]
from ansible.plugins.lookup import LookupBase  # type: ignore[import-untyped]

DOCUMENTATION = """
name: munge_key_check
short_description: What is wrong with a MUNGE key file on the controller ("" when nothing)
description:
  - Checks the key's mode (no group or other access) and its length, decrypting an ansible-vault file to count it.
  - Returns a message naming the problem and how to fix it, never the key.
options:
  _terms:
    description: The key file's path on the controller.
    required: true
  min_bytes:
    description: Fewest bytes accepted.
    type: int
    default: 32
  max_bytes:
    description: Most bytes accepted.
    type: int
    default: 1024
"""

MAKE = "make one with `dd if=/dev/urandom bs=1 count=1024 of=munge.key && chmod 0400 munge.key`"


def key_problem(path: str, length: int | None, mode: int | None, vaulted: bool, min_bytes: int,
                max_bytes: int) -> str:
    """The message for a key at `path` of `length` bytes (decrypted) and file `mode`; "" when it is fine.
    `length` and `mode` are None when the file is missing or not a regular file."""
    if not path:
        return f"munge_key_file is not set: {MAKE} and set munge_key_file to its path on the controller"
    if length is None or mode is None:
        return f"the MUNGE key file {path} does not exist on the controller (or is not a regular file): {MAKE}"
    if not vaulted and mode & 0o077:
        return (f"the MUNGE key file {path} has mode {mode:04o}, which lets its group or others read it: "
                f"chmod 0400 {path} (or encrypt it with ansible-vault)")
    if not min_bytes <= length <= max_bytes:
        return (f"the MUNGE key file {path} holds {length} bytes; munged needs {min_bytes} to {max_bytes}: {MAKE}")
    return ""


class LookupModule(LookupBase):  # type: ignore[misc]
    def run(self, terms: list[str], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[str]:
        self.set_options(var_options=variables, direct=kwargs)
        min_bytes, max_bytes = int(self.get_option("min_bytes")), int(self.get_option("max_bytes"))
        out = []
        for term in terms:
            path = str(term or "")
            try:
                st = os.stat(path) if path else None
            except OSError:
                st = None
            if st is None or not stat.S_ISREG(st.st_mode):
                out.append(key_problem(path, None, None, False, min_bytes, max_bytes))
                continue
            try:
                real = self._loader.get_real_file(path, decrypt=True)
            except AnsibleError as exc:  # a vault file without the secret to open it
                out.append(f"the MUNGE key file {path} could not be decrypted: {type(exc).__name__} "
                           "(give the run its vault password: --ask-vault-pass or --vault-password-file)")
                continue
            try:
                vaulted = os.path.realpath(real) != os.path.realpath(path)
                length = os.path.getsize(real)
            finally:
                self._loader.cleanup_tmp_file(real)
            out.append(key_problem(path, length, stat.S_IMODE(st.st_mode), vaulted, min_bytes, max_bytes))
        return out
