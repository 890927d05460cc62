"""`python -m training pack-env`: the training environment as one relocatable archive, for `provision ship`.

A careful tar of the virtual environment (no bytecode caches), with a manifest inside and beside it: the
versions that must match on every host (Python, torch, its CUDA, NCCL, DeepSpeed), the venv's prefix and
base interpreter, each file's SHA-256, the tree's digest (`env_id`, what the launcher compares) and the
archive's own SHA-256. Relocation: the scripts under bin/ name the prefix; unpacking elsewhere rewrites
it there (`relocate_command`). venv-pack (unmaintained since 2018) and conda-pack (conda only) were not
taken; the base interpreter in pyvenv.cfg must exist on the hosts (the golden image has it)."""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import shlex
import sys
import tarfile
from pathlib import Path

from training.exits import error_exit
from training.prepared import file_sha256

MANIFEST = ".bringup-env.json"  # with every file's digest
SUMMARY = ".bringup-env-summary.json"  # versions and env_id: what a host is asked for
SUMS = ".bringup-env.sha256"  # `sha256sum -c` on the host checks every file
ARCHIVE = "bringup-env.tar.gz"
SKIP_DIRS = {"__pycache__"}
SKIP_SUFFIXES = (".pyc",)
DIST = {"torch": "torch", "deepspeed": "deepspeed", "nccl": "nvidia_nccl_cu", "triton": "triton"}


def files_of(venv: Path) -> list[Path]:
    out = []
    for p in sorted(venv.rglob("*")):
        rel = p.relative_to(venv)
        if any(part in SKIP_DIRS for part in rel.parts) or p.name.endswith(SKIP_SUFFIXES) or \
                p.name in (MANIFEST, SUMMARY, SUMS):
            continue
        if p.is_file() or p.is_symlink():
            out.append(p)
    return out


def versions(venv: Path) -> dict[str, str | None]:
    """From the venv's dist-info folders and torch/version.py, without importing anything from it."""
    site = next(venv.glob("lib/python3*/site-packages"), None)
    found: dict[str, str | None] = {k: None for k in ("python", *DIST, "cuda")}
    cfg = venv / "pyvenv.cfg"
    if cfg.is_file():
        m = re.search(r"^version\s*=\s*(\S+)", cfg.read_text(), re.M)
        found["python"] = m.group(1) if m else None
    if site is None:
        return found
    for info in sorted(site.glob("*.dist-info")):
        name, _, rest = info.name[:-len(".dist-info")].partition("-")
        for key, prefix in DIST.items():
            if name.lower() == prefix or (key == "nccl" and name.lower().startswith(prefix)):
                found[key] = rest
    tv = site / "torch" / "version.py"
    if tv.is_file():
        m = re.search(r"^cuda(?:\s*:\s*\S+)?\s*=\s*['\"]([^'\"]+)['\"]", tv.read_text(), re.M)
        found["cuda"] = m.group(1) if m else None
    return found


def manifest(venv: Path) -> dict[str, object]:
    venv = venv.resolve()
    digests = {}
    for p in files_of(venv):
        rel = str(p.relative_to(venv))
        digests[rel] = f"link:{p.readlink()}" if p.is_symlink() else file_sha256(p)
    tree = hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(digests.items())).encode()).hexdigest()
    cfg = venv / "pyvenv.cfg"
    home = re.search(r"^home\s*=\s*(.+)$", cfg.read_text(), re.M) if cfg.is_file() else None
    return {"format": 1, "prefix": str(venv), "base_python": home.group(1).strip() if home else None,
            "versions": versions(venv), "env_id": tree[:16], "tree_sha256": tree, "files": digests}


def pack(venv: Path, out_dir: Path) -> dict[str, object]:
    """Write OUT/bringup-env.tar.gz and OUT/bringup-env.manifest.json; returns the manifest."""
    venv = venv.resolve()
    man = manifest(venv)
    out_dir.mkdir(parents=True, exist_ok=True)
    archive = out_dir / ARCHIVE
    body = json.dumps(man, indent=1, sort_keys=True).encode()
    summary = {k: v for k, v in man.items() if k != "files"}
    sums = "".join(f"{d}  {n}\n" for n, d in sorted(man["files"].items())  # type: ignore[attr-defined]
                   if not d.startswith("link:")).encode()
    members = {MANIFEST: body, SUMMARY: json.dumps(summary, sort_keys=True).encode(), SUMS: sums}
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for p in files_of(venv):
            tar.add(p, arcname=str(p.relative_to(venv)), recursive=False)
    man["archive_sha256"] = summary["archive_sha256"] = file_sha256(archive)
    man["archive_bytes"] = summary["archive_bytes"] = archive.stat().st_size
    (out_dir / "bringup-env.manifest.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return man


def relocate_command(old_prefix: str, new_prefix: str) -> str:
    """Shell that rewrites the old prefix in bin/'s text files (shebangs, activate) after unpacking."""
    sed = f"s#{old_prefix}#{new_prefix}#g"
    return (f"grep -rlI --null -F {shlex.quote(old_prefix)} {shlex.quote(new_prefix + '/bin')} 2>/dev/null "
            f"| xargs -0 -r sed -i {shlex.quote(sed)}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training pack-env")
    p.add_argument("--venv", type=Path, default=Path(sys.prefix), help="the environment (default: this one)")
    p.add_argument("--out", type=Path, required=True, help="folder for the archive and its manifest")
    a = p.parse_args(argv)
    if not (a.venv / "pyvenv.cfg").is_file():
        return error_exit(f"pack-env: {a.venv} is not a virtual environment (no pyvenv.cfg)")
    man = pack(a.venv, a.out)
    print(f"wrote {a.out / ARCHIVE} ({man['archive_bytes']:,} bytes, env {man['env_id']}, "
          f"versions {json.dumps(man['versions'])})")
    return 0
