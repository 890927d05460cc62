"""The local apt repository of stand-in vendor packages: built with equivs, signed, served on loopback.

Built once per content (a hash of the package table and payload files) under the cache directory and
reused; `serve` starts a loopback HTTP server over it (the only traffic is 127.x).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path

from sim.testhosts.cache import cache_root, locked
from sim.testhosts.errors import TestHostError
from sim.testhosts.proc import run
from sim.testhosts.standins import StandIn, stand_ins

PAYLOAD = Path(__file__).resolve().parent / "payload"
# distro: what a Debian 12 host's archive would serve; ubuntu: Canonical's archive (packages Debian lacks).
FLAT_REPOS = ("cuda", "toolkit", "doca", "mlnx", "distro", "ubuntu")
DOCKER_SUITE = "bookworm"
KEY_NAME = "bringup-test-repo.asc"
_FORMAT = "3"  # bump when the layout below changes


@dataclass(frozen=True)
class Repo:
    root: Path
    fingerprint: str

    @property
    def key_path(self) -> Path:
        return self.root / "keys" / KEY_NAME


def content_hash(packages: list[StandIn]) -> str:
    digest = hashlib.sha256(_FORMAT.encode())
    digest.update(repr(packages).encode())
    for path in sorted(PAYLOAD.iterdir()):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _substitute(text: str, subs: dict[str, str]) -> str:
    for key, value in subs.items():
        text = text.replace(f"@{key}@", value)
    return text


def _module(name: str, version: str, workdir: Path) -> Path:
    """A relocatable ELF object whose .modinfo section modinfo and depmod read like a real module's."""
    info = (f"license=Dual MIT/GPL\0description=NVIDIA {name} (bringup test-host stand-in)\0version={version}\0"
            f"name={name.replace('-', '_')}\0vermagic=stand-in SMP mod_unload modversions \0")
    raw = workdir / f"{name}.modinfo"
    raw.write_bytes(info.encode())
    out = workdir / f"{name}.ko"
    run(["objcopy", "-I", "binary", "-O", "elf64-x86-64", "-B", "i386:x86-64",
         "--rename-section", ".data=.modinfo,alloc,load,readonly,data,contents", raw.name, out.name], cwd=workdir)
    raw.unlink()
    return out


def _control(pkg: StandIn, workdir: Path) -> str:
    lines = [
        "Section: misc", "Priority: optional", "Standards-Version: 4.6.2",
        f"Package: {pkg.name}", f"Version: {pkg.version}",
        "Maintainer: bringup test hosts <testhosts@bringup.invalid>", "Architecture: amd64",
    ]
    if pkg.depends:
        lines.append(f"Depends: {', '.join(pkg.depends)}")
    files: list[str] = []
    for dest, source in pkg.files:
        target = workdir / Path(dest).name
        text = (PAYLOAD / source).read_text(encoding="utf-8")
        target.write_text(_substitute(text, pkg.substitutions), encoding="utf-8")
        target.chmod((PAYLOAD / source).stat().st_mode & 0o777)
        files.append(f"{target.name} {Path(dest).parent}/")
    version = pkg.substitutions.get("DRIVER_VERSION", pkg.version)
    for module in pkg.modules:
        files.append(f"{_module(module, version, workdir).name} /usr/src/nvidia-{version}/")
    if files:
        lines.append("Files: " + "\n ".join(files))
    for field, script in (("Postinst", pkg.postinst), ("Prerm", pkg.prerm)):
        if script:
            target = workdir / field.lower()
            target.write_text(_substitute((PAYLOAD / script).read_text(encoding="utf-8"), pkg.substitutions),
                              encoding="utf-8")
            lines.append(f"{field}: {target.name}")
    lines += [f"Description: {pkg.description}",
              " Stand-in built with equivs for the bringup Debian test hosts: it carries the files the",
              " Ansible roles look at, with the real package's name and version."]
    return "\n".join(lines) + "\n"


def _build_one(pkg: StandIn, out_dir: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix=f"equivs-{pkg.name}-") as tmp:
        workdir = Path(tmp)
        (workdir / "control").write_text(_control(pkg, workdir), encoding="utf-8")
        run(["equivs-build", "control"], cwd=workdir, timeout=300)
        debs = list(workdir.glob("*.deb"))
        if len(debs) != 1:
            raise TestHostError(f"equivs-build of {pkg.name} made {len(debs)} .deb files")
        target = out_dir / debs[0].name
        shutil.move(str(debs[0]), target)
        return target


def _release(directory: Path, files: list[Path], suite: str, components: str | None) -> str:
    lines = ["Origin: bringup-test", "Label: bringup test hosts"]
    if suite:
        lines += [f"Suite: {suite}", f"Codename: {suite}"]
    lines += [f"Date: {formatdate(time.time(), usegmt=True)}", "Architectures: amd64"]
    if components:
        lines.append(f"Components: {components}")
    lines.append("SHA256:")
    for path in files:
        data = path.read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {path.relative_to(directory)}")
    return "\n".join(lines) + "\n"


class _Signer:
    def __init__(self, home: Path) -> None:
        self.home = home

    def _gpg(self, *args: str) -> str:
        return run(["gpg", "--batch", "--quiet", "--homedir", str(self.home), "--pinentry-mode", "loopback",
                    "--passphrase", "", *args])

    def make_key(self) -> str:
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._gpg("--quick-gen-key", "bringup test repository <repo@bringup.invalid>", "ed25519", "sign", "never")
        listing = self._gpg("--with-colons", "--list-keys")
        return next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))

    def export(self, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        self._gpg("--armor", "--output", str(target), "--export")

    def sign(self, release: Path) -> None:
        self._gpg("--yes", "--clearsign", "--output", str(release.parent / "InRelease"), str(release))
        self._gpg("--yes", "--armor", "--detach-sign", "--output", str(release.parent / "Release.gpg"), str(release))

    def stop_agent(self) -> None:
        # gpg starts a gpg-agent for the home directory; nothing may outlive the build.
        subprocess.run(["gpgconf", "--homedir", str(self.home), "--kill", "all"], capture_output=True, check=False)


def _index(root: Path, signer: _Signer, debs: dict[str, list[Path]]) -> None:
    for name in FLAT_REPOS:
        directory = root / name
        directory.mkdir(parents=True, exist_ok=True)
        for deb in debs.get(name, []):
            shutil.move(str(deb), directory / deb.name)
        packages = run(["dpkg-scanpackages", "--multiversion", ".", "/dev/null"], cwd=directory)
        packages = "\n".join(line for line in packages.splitlines() if not line.startswith("dpkg-scanpackages:"))
        (directory / "Packages").write_text(packages.strip() + "\n", encoding="utf-8")
        (directory / "Packages.gz").write_bytes(gzip.compress((directory / "Packages").read_bytes(), mtime=0))
        release = directory / "Release"
        release.write_text(_release(directory, [directory / "Packages", directory / "Packages.gz"], "", None))
        signer.sign(release)
    docker = root / "docker"
    pool = docker / "pool"
    pool.mkdir(parents=True, exist_ok=True)
    for deb in debs.get("docker", []):
        shutil.move(str(deb), pool / deb.name)
    dist = docker / "dists" / DOCKER_SUITE
    binary = dist / "stable" / "binary-amd64"
    binary.mkdir(parents=True, exist_ok=True)
    packages = run(["dpkg-scanpackages", "--multiversion", "pool", "/dev/null"], cwd=docker)
    packages = "\n".join(line for line in packages.splitlines() if not line.startswith("dpkg-scanpackages:"))
    (binary / "Packages").write_text(packages.strip() + "\n", encoding="utf-8")
    release = dist / "Release"
    release.write_text(_release(dist, [binary / "Packages"], DOCKER_SUITE, "stable"))
    signer.sign(release)


def build(packages: list[StandIn] | None = None, *, jobs: int = 4, log: bool = True) -> Repo:
    """The repository for `packages` (default: every stand-in), built unless the cache has it."""
    packages = packages if packages is not None else stand_ins()
    base = cache_root() / "testhosts"
    root = base / f"repo-{content_hash(packages)}"
    with locked(base / "repo.lock"):
        if not (root / ".complete").exists():
            if log:
                print(f"building {len(packages)} stand-in packages with equivs into {root}", file=sys.stderr)
            if root.exists():
                shutil.rmtree(root)
            staging = Path(tempfile.mkdtemp(prefix="repo-", dir=base))
            debs_dir = staging / "debs"
            debs_dir.mkdir()
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                built = list(pool.map(lambda p: _build_one(p, debs_dir), packages))
            by_repo: dict[str, list[Path]] = {}
            for pkg, deb in zip(packages, built, strict=True):
                by_repo.setdefault(pkg.repo, []).append(deb)
            signer = _Signer(staging / "gnupg")
            try:
                fingerprint = signer.make_key()
                signer.export(staging / "keys" / KEY_NAME)
                _index(staging, signer, by_repo)
            finally:
                signer.stop_agent()
            debs_dir.rmdir()
            (staging / "fingerprint").write_text(fingerprint + "\n", encoding="utf-8")
            (staging / ".complete").touch()
            os.rename(staging, root)
    return Repo(root=root, fingerprint=(root / "fingerprint").read_text(encoding="utf-8").strip())
