#!/usr/bin/python
"""Say whether a vendor repository's pinned key fingerprint is well formed, whether the key installed
for it has that fingerprint and whether its apt definition is the wanted one.

Read-only: one `gpg --show-keys` of the installed keyring file (when there is one) and a read of the
`.sources` file; nothing is fetched or written. The parsing and the comparison are pure functions
(`fingerprints`, `sources_current`), unit-tested in tests/ansible/test_helper_modules.py.
"""

from __future__ import annotations

import os
import re
import stat

DOCUMENTATION = r"""
module: vendor_repo_check
short_description: Check a vendor repository's pinned key fingerprint, its installed key and its definition
description:
  - Reports whether the pinned fingerprint is 40 hex digits (spaces allowed); the role refuses it otherwise.
  - Reads the installed keyring file with C(gpg --show-keys) and reports whether it holds the pinned key.
  - Reports whether the C(.sources) file has exactly the wanted content, owner root:root and mode 0644.
options:
  name: {type: str, required: true, description: repository name (in messages)}
  key_fingerprint: {type: str, required: true, description: the fingerprint the site pins}
  keyring: {type: path, required: true, description: the installed keyring file of the repository}
  sources_file: {type: path, required: true, description: the repository's deb822 definition}
  sources_content: {type: str, required: true, description: what the definition must contain}
author: bringup
"""

RETURN = r"""
fingerprint_ok: {type: bool, description: the pinned fingerprint is 40 hex digits}
expected: {type: str, description: the pinned fingerprint, normalised (upper case, no spaces)}
fingerprints: {type: list, description: fingerprints of the installed keyring (empty when absent or unreadable)}
trusted: {type: bool, description: the installed keyring holds the pinned key}
sources_current: {type: bool, description: the definition file has the wanted content, owner and mode}
"""

_FPR = re.compile(r"^[0-9A-F]{40}$")


def normalise(fingerprint: str) -> str:
    return fingerprint.replace(" ", "").upper()


def well_formed(fingerprint: str) -> bool:
    return _FPR.match(normalise(fingerprint)) is not None


def fingerprints(colons: str) -> list[str]:
    """Fingerprints from `gpg --with-colons` output (field 10 of each `fpr` record)."""
    found = []
    for line in colons.splitlines():
        fields = line.split(":")
        if fields[0] == "fpr" and len(fields) > 9 and fields[9]:
            found.append(fields[9].upper())
    return found


def sources_current(path: str, content: str) -> bool:
    """The definition file exists with exactly `content`, owned by root:root, mode 0644."""
    try:
        info = os.stat(path)
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return False
    return text == content and info.st_uid == 0 and info.st_gid == 0 and stat.S_IMODE(info.st_mode) == 0o644


def main() -> None:
    # Imported here: importing ansible.module_utils patches sys.intern process-wide (see zfs_raidz_plan).
    from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]

    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "key_fingerprint": {"type": "str", "required": True, "no_log": False},
            "keyring": {"type": "path", "required": True},
            "sources_file": {"type": "path", "required": True},
            "sources_content": {"type": "str", "required": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    expected = normalise(params["key_fingerprint"])
    found: list[str] = []
    if os.path.exists(params["keyring"]):
        rc, out, _ = module.run_command(["gpg", "--batch", "--no-default-keyring", "--show-keys", "--with-colons",
                                         params["keyring"]])
        if rc == 0:
            found = fingerprints(out)
    module.exit_json(changed=False, fingerprint_ok=well_formed(expected), expected=expected, fingerprints=found,
                     trusted=well_formed(expected) and expected in found,
                     sources_current=sources_current(params["sources_file"], params["sources_content"]))


if __name__ == "__main__":
    main()
