#!/usr/bin/python
"""Merge the role's settings and the nvidia runtime into Docker's daemon.json, in one task.

Finds `nvidia-container-runtime` on PATH (fails, saying what to check, when the toolkit did not install
it), reads the daemon.json that is there, merges the settings into it (recursively; keys it does not
set are kept) and always (re)adds what the role owns: the `nvidia` runtime with that path,
`default-runtime` and `storage-driver` when given. The file is written only when its content, owner or
mode differ. The merge is a pure function (`merged`), unit-tested in tests/ansible/test_helper_modules.py.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

DOCUMENTATION = r"""
module: container_runtime_daemon_json
short_description: Merge settings and the nvidia runtime into Docker's daemon.json
options:
  path: {type: path, required: true, description: the daemon.json file}
  settings: {type: dict, default: {}, description: settings merged (recursively) into the file}
  default_runtime: {type: str, default: "", description: "default-runtime; empty leaves the key as it is"}
  storage_driver: {type: str, default: "", description: "storage-driver; empty leaves the key as it is"}
  runtime_missing_hint: {type: str, default: "", description: what to check when the runtime is not on PATH}
author: bringup
"""

RETURN = r"""
config: {type: dict, description: the daemon.json content after the run}
runtime_path: {type: str, description: the nvidia-container-runtime found on PATH}
"""


def _merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) \
            else value
    return out


def merged(existing: Mapping[str, Any], settings: Mapping[str, Any], runtime_path: str,
           default_runtime: str = "", storage_driver: str = "") -> dict[str, Any]:
    """The daemon.json content: `existing` with `settings` merged in, then the keys the role owns."""
    config = _merge(existing, settings)
    runtimes = dict(existing.get("runtimes") or {})
    runtimes["nvidia"] = {"path": runtime_path, "args": []}
    config["runtimes"] = runtimes
    if default_runtime:
        config["default-runtime"] = default_runtime
    if storage_driver.strip():
        config["storage-driver"] = storage_driver.strip()
    return config


def render(config: Mapping[str, Any]) -> str:
    return json.dumps(config, indent=2, sort_keys=True, separators=(",", ": ")) + "\n"


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]

    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "settings": {"type": "dict", "default": {}},
            "default_runtime": {"type": "str", "default": ""},
            "storage_driver": {"type": "str", "default": ""},
            "runtime_missing_hint": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    params = module.params
    runtime = module.get_bin_path("nvidia-container-runtime")
    if not runtime and module.check_mode:
        # --check on a host the toolkit is not installed on yet: the path its package installs the runtime at.
        runtime = "/usr/bin/nvidia-container-runtime"
    if not runtime:
        module.fail_json(msg=f"nvidia-container-runtime is not on PATH {params['runtime_missing_hint']}".strip())
    path = params["path"]
    current = ""
    existing: dict[str, Any] = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            current = handle.read()
        try:
            existing = json.loads(current) if current.strip() else {}
        except ValueError as exc:
            module.fail_json(msg=f"{path} is not valid JSON ({exc}): fix or remove it, then re-run")
        if not isinstance(existing, dict):
            module.fail_json(msg=f"{path} holds a JSON {type(existing).__name__}, not an object: fix or remove it")
    config = merged(existing, params["settings"], runtime, params["default_runtime"], params["storage_driver"])
    text = render(config)
    st = os.stat(path) if current else None
    changed = text != current or st is None or (st.st_mode & 0o7777, st.st_uid, st.st_gid) != (0o644, 0, 0)
    if changed and not module.check_mode:
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            os.makedirs(directory, mode=0o755)
            os.chmod(directory, 0o755)
        tmp = f"{path}.bringup-tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chown(tmp, 0, 0)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    module.exit_json(changed=changed, config=config, runtime_path=runtime)


if __name__ == "__main__":
    main()
