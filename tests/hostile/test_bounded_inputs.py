"""Hostile input files beyond the site file: cabling designs and the health overlay are read under the
same bounds (provision/site/bounded.py): regular files only, a size cap, YAML alias expansion capped."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from fabric.design import load_design, parse_design
from fabric.errors import DesignError
from provision.health.errors import HealthError
from provision.health.expectations import ENV_OVERLAY, load_overlay
from provision.site import load_site
from provision.site.bounded import InputRefused, read_text
from tests.sites import copy_sim_site

REPO = Path(__file__).resolve().parents[2]
SIM_SITE = REPO / "inventory" / "sim" / "site.yml"
SIM_DESIGN = REPO / "inventory" / "sim" / "fabric" / "design.yml"


def _laughs(levels: int, *, flow: bool = False) -> str:
    """Each level an anchor of 10 aliases of the one before: 10**levels nodes once expanded."""
    items = [f"&l0 [{', '.join(['lol'] * 10)}]"]
    items += [f"&l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    if flow:  # all on one line, as one value of the fast (one JSON item per line) layout
        return f"[{', '.join(items)}]"
    return "\n".join(f"k{i}: {item}" for i, item in enumerate(items)) + "\n"


def test_a_billion_laughs_design_is_refused_before_it_is_expanded() -> None:
    started = time.monotonic()
    with pytest.raises(DesignError, match="expands to more than 5000000 YAML nodes"):
        parse_design(_laughs(9), "d.yml")
    assert time.monotonic() - started < 2.0


def test_a_one_line_alias_bomb_in_the_fast_layout_is_refused_too() -> None:
    text = SIM_DESIGN.read_text().replace("defaults: {width: 4X, speed: HDR}",
                                          f"defaults: {_laughs(9, flow=True)}", 1)
    assert _laughs(9, flow=True) in text
    started = time.monotonic()
    with pytest.raises(DesignError, match="expands to more than 5000000 YAML nodes"):
        parse_design(text, "d.yml")
    assert time.monotonic() - started < 2.0


def test_a_deeply_nested_json_line_in_a_design_is_a_design_error_not_a_recursion_error() -> None:
    text = SIM_DESIGN.read_text().replace("switches:\n", "switches:\n  - " + "[" * 100_000 + "]" * 100_000 + "\n", 1)
    with pytest.raises(DesignError):
        parse_design(text, "d.yml")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_design_path_that_is_a_device_is_refused_without_reading_it(device: str) -> None:
    with pytest.raises(DesignError, match="character device: only a regular file is read"):
        load_design(Path(device))


def test_a_design_that_is_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "design.yml")
    with pytest.raises(DesignError, match="a pipe"):
        load_design(tmp_path / "design.yml")


def test_a_design_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "design.yml"
    with big.open("wb") as out:
        out.truncate(64 * 1024 * 1024 + 1)  # sparse
    with pytest.raises(DesignError, match="larger than the 64 MiB limit"):
        load_design(big)


def test_the_shipped_designs_still_load() -> None:
    assert len(load_design(SIM_DESIGN).links) == 289
    assert len(load_design(REPO / "inventory" / "examples" / "fabric" / "imbue-scale-design.yml").links) > 10_000


@pytest.fixture
def sim_site(tmp_path: Path) -> Path:
    doc = yaml.safe_load(SIM_SITE.read_text())
    doc.pop("fabric", None)  # health does not read the cabling design
    (tmp_path / "site.yml").write_text(yaml.safe_dump(doc))
    return tmp_path / "site.yml"


def test_a_billion_laughs_health_overlay_is_refused(sim_site: Path) -> None:
    (sim_site.parent / "health-expectations.yml").write_text(_laughs(9))
    started = time.monotonic()
    with pytest.raises(HealthError, match="expands to more than 1000000 YAML nodes"):
        load_overlay(load_site(sim_site), {})
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_a_health_overlay_that_is_not_a_regular_file_is_refused_not_read_or_ignored(
        sim_site: Path, target: str) -> None:
    if target == "fifo":
        target = str(sim_site.parent / "overlay.yml")
        os.mkfifo(target)
    with pytest.raises(HealthError, match="only a regular file is read"):
        load_overlay(load_site(sim_site), {ENV_OVERLAY: target})


def test_a_health_overlay_over_the_size_limit_is_refused(sim_site: Path) -> None:
    big = sim_site.parent / "health-expectations.yml"
    with big.open("wb") as out:
        out.truncate(4 * 1024 * 1024 + 1)  # sparse
    with pytest.raises(HealthError, match="larger than the 4 MiB limit"):
        load_overlay(load_site(sim_site), {})


def test_no_overlay_file_is_still_no_overlay(sim_site: Path) -> None:
    assert load_overlay(load_site(sim_site), {}) == {}
    assert load_overlay(load_site(sim_site), {ENV_OVERLAY: str(sim_site.parent / "absent.yml")}) == {}


# The commands themselves (issue 16: `--site /dev/zero` hung, `--hosts @/dev/zero` was OOM-killed,
# `--hosts 'gpu-r1-[0-99999999]'` expanded without limit): one clear line and exit 1, in seconds.


def _provision(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    def limit_memory() -> None:  # a regression must fail here as a MemoryError, not take the machine down
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))

    return subprocess.run([sys.executable, "-m", "provision", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=30, preexec_fn=limit_memory, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize(("site", "expected"), [("/dev/zero", "is a character device: only a regular file is read"),
                                                ("fifo", "is a pipe (FIFO): only a regular file is read")],
                         ids=["dev-zero", "fifo"])
def test_status_of_a_site_that_is_a_device_or_fifo_is_one_clear_error(tmp_path: Path, site: str,
                                                                      expected: str) -> None:
    if site == "fifo":
        site = str(tmp_path / "site.yml")
        os.mkfifo(site)
    done = _provision("status", "--site", site, cwd=tmp_path)
    assert done.returncode == 1 and expected in done.stderr and "internal error" not in done.stderr


@pytest.mark.parametrize(("hosts", "expected"), [
    ("@/dev/zero", "hostfile /dev/zero is a character device"),
    ("gpu-r1-[0-99999999]", "names more than 100000 hosts"),
], ids=["hostfile-dev-zero", "huge-range"])
def test_a_hostile_host_selection_is_one_clear_error(tmp_path: Path, hosts: str, expected: str) -> None:
    site = copy_sim_site(tmp_path / "site")
    done = _provision("power", "status", "--site", str(site), "--hosts", hosts, cwd=tmp_path)
    assert done.returncode == 1 and expected in done.stderr and "internal error" not in done.stderr


def test_the_bounded_reader_reads_text_as_path_read_text_does(tmp_path: Path) -> None:
    # Same text, so the same content key for the site caches whichever way a file was read.
    crlf = tmp_path / "site.yml"
    crlf.write_bytes(b"name: lab\r\nracks: []\rx: 1\n")
    assert read_text(crlf, limit=1024) == crlf.read_text(encoding="utf-8")
    with pytest.raises(InputRefused, match="larger than the 8 bytes limit"):
        read_text(crlf, limit=8)


def test_an_ssh_address_map_or_known_hosts_that_is_a_device_is_refused(tmp_path: Path) -> None:
    from provision.ssh.client import TrustOnFirstUse, load_address_map
    from provision.ssh.errors import SshConfigError

    with pytest.raises(SshConfigError, match="only a regular file"):
        load_address_map(Path("/dev/zero"), 22)
    big = tmp_path / "known_hosts"
    with big.open("wb") as out:
        out.truncate(65 * 1024 * 1024)  # sparse: larger than the cap without writing it
    with pytest.raises(SshConfigError, match="larger than"):
        TrustOnFirstUse(big)


def test_a_vault_that_is_not_a_regular_file_is_refused_before_ansible_vault_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.errors import CredentialError
    from provision.site.credentials import _decrypt

    fifo = tmp_path / "vault.yml"
    os.mkfifo(fifo)
    monkeypatch.setattr("provision.site.credentials._ansible_vault", lambda: pytest.fail("ansible-vault ran"))
    with pytest.raises(CredentialError, match="not a regular file"):
        _decrypt(fifo, "bmc")
