#!/usr/bin/python
"""Write a role's directories and small files in one module call (one task per host instead of one per
file), and say which of them changed so that each handler can run only for its own file.

Each directory is created when missing and each file written (atomically, through a temporary file
in the same directory) only when its content, mode, owner or group differ; the comparison and the
writing are plain functions (`ensure_directory`, `ensure_file`), unit-tested in
tests/ansible/test_helper_modules.py.
"""

from __future__ import annotations

import grp
import os
import pwd
import tempfile
from collections.abc import Mapping
from typing import Any

DOCUMENTATION = r"""
module: managed_files
short_description: Ensure several directories and small files with exact content, mode and owner
options:
  directories:
    type: list
    elements: dict
    default: []
    description: "{path, mode (default 0755), owner (root), group (root)}, created in order before the files"
  files:
    type: list
    elements: dict
    default: []
    description: "{dest, content, mode (default 0644), owner (root), group (root), name (default dest)}"
author: bringup
"""

RETURN = r"""
changed_files: {type: list, description: the name (or dest) of every file written by this run}
changed_directories: {type: list, description: every directory created or adjusted by this run}
"""


def _ids(owner: str, group: str) -> tuple[int, int]:
    return pwd.getpwnam(owner).pw_uid, grp.getgrnam(group).gr_gid


def _mode(value: Any, default: int) -> int:
    return default if value in (None, "") else (int(value, 8) if isinstance(value, str) else int(value))


def ensure_directory(spec: Mapping[str, Any], check: bool = False) -> bool:
    """Create the directory (and missing parents) or fix its mode/owner; True when something changed."""
    path = str(spec["path"])
    mode = _mode(spec.get("mode"), 0o755)
    uid, gid = _ids(spec.get("owner") or "root", spec.get("group") or "root")
    if not os.path.isdir(path):
        if not check:
            os.makedirs(path, mode=mode)
            os.chown(path, uid, gid)
            os.chmod(path, mode)
        return True
    st = os.stat(path)
    if (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (mode, uid, gid):
        return False
    if not check:
        os.chown(path, uid, gid)
        os.chmod(path, mode)
    return True


def ensure_file(spec: Mapping[str, Any], check: bool = False) -> bool:
    """Write the file when its content, mode or owner differ; True when it was (or would be) written."""
    dest = str(spec["dest"])
    content = str(spec["content"]).encode("utf-8")
    mode = _mode(spec.get("mode"), 0o644)
    uid, gid = _ids(spec.get("owner") or "root", spec.get("group") or "root")
    try:
        with open(dest, "rb") as handle:
            current = handle.read()
        st = os.stat(dest)
        if current == content and (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (mode, uid, gid):
            return False
    except FileNotFoundError:
        pass
    if check:
        return True
    directory = os.path.dirname(dest) or "."
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"directory {directory} of {dest} does not exist: list it in directories")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(dest)}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
        os.chown(tmp, uid, gid)
        os.chmod(tmp, mode)
        os.replace(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]

    module = AnsibleModule(
        argument_spec={
            "directories": {"type": "list", "elements": "dict", "default": []},
            "files": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )
    changed_directories: list[str] = []
    changed_files: list[str] = []
    try:
        for spec in module.params["directories"]:
            if ensure_directory(spec, module.check_mode):
                changed_directories.append(str(spec["path"]))
        for spec in module.params["files"]:
            if ensure_file(spec, module.check_mode):
                changed_files.append(str(spec.get("name") or spec["dest"]))
    except (OSError, KeyError, ValueError) as exc:
        module.fail_json(msg=f"managed_files: {exc}", changed_files=changed_files,
                         changed_directories=changed_directories)
    module.exit_json(changed=bool(changed_files or changed_directories), changed_files=changed_files,
                     changed_directories=changed_directories)


if __name__ == "__main__":
    main()
