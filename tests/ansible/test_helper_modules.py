"""The helper roles' decisions and modules: pinned_packages_decide, enabled_units_todo, vendor_repo_check,
common_clock_check, host_state_read, container_runtime_daemon_json, nvidia_fabricmanager_match and managed_files.

The decisions are pure functions over the tools' output (dpkg-query, gpg --with-colons); the outputs
below are in the exact formats those tools print (the gpg listing is of a real signing key's shape).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load(role: str, kind: str, name: str) -> ModuleType:
    path = REPO / "roles" / role / kind / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


pp = _load("pinned_packages", "filter_plugins", "pinned_packages")
vr = _load("vendor_repo", "library", "vendor_repo_check")

DRIVER = "nvidia-driver-580-server-open"
UTILS = "nvidia-utils-580-server"
QUERY = (
    f"{DRIVER}\t580.159.04-0ubuntu1\thold ok installed\n"
    f"{UTILS}\t580.159.04-0ubuntu1\tinstall ok installed\n"
    "chrony\t4.3-2+deb12u1\tinstall ok installed\n"
    "jq\t\tunknown ok not-installed\n"
)


def test_a_set_at_its_pins_and_held_needs_nothing() -> None:
    decision = pp.decide([{"name": DRIVER, "version": "580.159.04-*"}], QUERY, hold=True)
    assert decision.install == () and decision.hold == () and decision.wrong_holds == ()
    assert decision.installed == {DRIVER: "580.159.04-0ubuntu1"}


def test_missing_packages_are_installed_at_their_pin_or_the_candidate() -> None:
    decision = pp.decide([{"name": "jq", "version": ""}, {"name": "lsof"}, {"name": "chrony", "version": ""},
                          {"name": "numactl", "version": "2.0.16-1"}], QUERY, hold=False)
    assert decision.install == ("jq", "lsof", "numactl=2.0.16-1")
    assert decision.hold == ()


def test_an_unheld_package_at_another_version_is_moved_and_every_unheld_one_is_held() -> None:
    decision = pp.decide([{"name": UTILS, "version": "580.95.05-*"}, {"name": DRIVER, "version": "580.159.04-*"}],
                         QUERY, hold=True)
    assert decision.install == (f"{UTILS}=580.95.05-*",)
    assert decision.hold == (UTILS,) and decision.wrong_holds == ()


def test_a_package_held_at_another_version_is_refused_with_the_unhold_to_run() -> None:
    decision = pp.decide([{"name": DRIVER, "version": "580.95.05-*"}], QUERY, hold=True)
    assert decision.wrong_holds == ((DRIVER, "580.159.04-0ubuntu1", "580.95.05-*"),)
    assert decision.install == ()
    message = pp.wrong_hold_message(decision.wrong_holds, "nvidia_driver_version")
    assert f"{DRIVER} is held at 580.159.04-0ubuntu1 but nvidia_driver_version pins 580.95.05-*" in message
    assert f"`apt-mark unhold {DRIVER}`" in message


def test_the_filter_reports_what_the_role_acts_on() -> None:
    assert pp.FilterModule().filters()["pinned_packages_decide"] is pp.pinned_packages_decide
    state = pp.pinned_packages_decide(QUERY, [{"name": DRIVER, "version": "580.95.05-*"}, {"name": "jq"}],
                                      True, "nvidia_driver_version")
    assert state["install"] == ["jq"] and state["hold"] == ["jq"]
    assert state["wrong_holds"] == [{"name": DRIVER, "have": "580.159.04-0ubuntu1", "want": "580.95.05-*"}]
    assert state["wrong_holds_message"].startswith(f"{DRIVER} is held at 580.159.04-0ubuntu1")
    assert pp.pinned_packages_decide(QUERY, [{"name": "chrony"}], False)["wrong_holds_message"] == ""


def test_versions_match_exactly_or_by_a_trailing_wildcard_only() -> None:
    assert pp.matches("580.159.04-0ubuntu1", "580.159.04-*")
    assert pp.matches("580.159.04-0ubuntu1", "580.159.04-0ubuntu1")
    assert not pp.matches("580.159.041-0ubuntu1", "580.159.04-*")
    assert not pp.matches("580.159.04-0ubuntu1", "580.159.04")
    assert pp.matches("1.0", "") and not pp.matches("", "")


# `gpg --show-keys --with-colons` of an exported public key with one signing subkey.
GPG_LISTING = """\
pub:-:4096:1:A4B469963BF863CC:1649270010:::-:::scESC::::::23::0:
fpr:::::::::EB693B3035CD5710E231E123A4B469963BF863CC:
uid:-::::1649270010::6A2D4A8EC6C1ECB6E0C8A1C6DC3D5AB0BD0E1E3A::cudatools <cudatools@nvidia.com>::::::::::0:
sub:-:4096:1:0F9D1D4C8E1A2B3C:1649270010::::::e::::::23:
fpr:::::::::3F0A9C1B2D4E5F60718293A4B5C6D7E80F9D1D4C:
"""


def test_gpg_listing_gives_every_key_and_subkey_fingerprint() -> None:
    assert vr.fingerprints(GPG_LISTING) == ["EB693B3035CD5710E231E123A4B469963BF863CC",
                                            "3F0A9C1B2D4E5F60718293A4B5C6D7E80F9D1D4C"]
    assert vr.fingerprints("") == []


def test_pinned_fingerprints_must_be_forty_hex_digits_spaces_allowed() -> None:
    assert vr.well_formed("EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC")
    assert vr.normalise("eb69 3b30") == "EB693B30"
    assert not vr.well_formed("")
    assert not vr.well_formed("3BF863CC")  # a short key id is not a fingerprint
    assert not vr.well_formed("EB693B3035CD5710E231E123A4B469963BF863CG")


def test_a_definition_is_current_only_with_the_exact_content_owner_and_mode(tmp_path: Path) -> None:
    wanted = "Types: deb\nURIs: http://127.0.2.30/docker\nSuites: bookworm\n"
    sources = tmp_path / "docker.sources"
    assert not vr.sources_current(str(sources), wanted)  # absent
    sources.write_text(wanted)
    sources.chmod(0o644)
    owned_by_root = sources.stat().st_uid == 0 and sources.stat().st_gid == 0
    assert vr.sources_current(str(sources), wanted) is owned_by_root
    sources.chmod(0o600)
    assert not vr.sources_current(str(sources), wanted)
    sources.chmod(0o644)
    sources.write_text(wanted.replace("docker", "docker-mirror"))
    assert not vr.sources_current(str(sources), wanted)


eu = _load("enabled_units", "filter_plugins", "enabled_units")

# `systemctl list-unit-files --no-legend --no-pager --full` on a configured Debian 12 test host.
UNIT_FILES = """\
chrony.service                         enabled         enabled
cpu-governor.service                   enabled         enabled
docker.service                         disabled        enabled
swap.target                            masked          enabled
bringup-health.timer                   enabled         enabled
"""


def test_units_in_their_wanted_state_need_nothing_and_a_bare_name_is_a_service() -> None:
    assert eu.enabled_units_todo(UNIT_FILES, ["chrony", "cpu-governor.service",
                                              {"name": "swap.target", "state": "masked"}]) == []


def test_disabled_absent_and_unmasked_units_are_todo() -> None:
    todo = eu.enabled_units_todo(UNIT_FILES, ["docker.service", "nvidia-dcgm.service",
                                              {"name": "bringup-health.timer", "state": "masked"}])
    assert todo == [{"name": "docker.service", "state": "enabled"},
                    {"name": "nvidia-dcgm.service", "state": "enabled"},
                    {"name": "bringup-health.timer", "state": "masked"}]
    assert eu.FilterModule().filters()["enabled_units_todo"] is eu.enabled_units_todo


cc = _load("common", "library", "common_clock_check")


def test_a_clock_within_the_limit_passes_and_one_beyond_it_says_what_to_fix() -> None:
    assert cc.skew_problem("gpu-r1-01", 1_000_029.5, 1_000_000.0, 30) is None
    assert cc.skew_problem("gpu-r1-01", 999_970.0, 1_000_000.0, 30) is None
    message = cc.skew_problem("gpu-r1-01", 1_000_000.0 - 3600, 1_000_000.0, 30)
    assert message is not None and message.startswith("the clock of gpu-r1-01 is -3600 s away")
    assert "(limit 30 s)" in message and "chronyc makestep" in message
    assert cc.skew_problem("gpu-r1-01", 1_000_031.0, 1_000_000.0, 30) is not None


hs = _load("host_state", "library", "host_state_read")


def test_a_unit_listing_with_no_match_is_empty_only_when_patterns_were_given() -> None:
    assert hs.listing_ok(0, UNIT_FILES, "", patterns=False)
    assert hs.listing_ok(1, "", "", patterns=True)  # systemctl: no unit file matched the patterns
    assert not hs.listing_ok(1, "", "", patterns=False)
    assert not hs.listing_ok(1, "", "Failed to connect to bus", patterns=True)


dj = _load("container_runtime", "library", "container_runtime_daemon_json")
SETTINGS = {"log-driver": "json-file", "log-opts": {"max-size": "100m", "max-file": "3"}}


def test_daemon_json_keeps_foreign_keys_and_runtimes_and_always_has_the_nvidia_runtime() -> None:
    existing = {"debug": True, "log-opts": {"mode": "non-blocking"},
                "runtimes": {"kata": {"path": "/usr/bin/kata-runtime"}, "nvidia": {"path": "/wrong"}}}
    config = dj.merged(existing, SETTINGS, "/usr/bin/nvidia-container-runtime", "nvidia", "")
    assert config == {"debug": True, "log-driver": "json-file",
                      "log-opts": {"mode": "non-blocking", "max-size": "100m", "max-file": "3"},
                      "runtimes": {"kata": {"path": "/usr/bin/kata-runtime"},
                                   "nvidia": {"path": "/usr/bin/nvidia-container-runtime", "args": []}},
                      "default-runtime": "nvidia"}
    assert "storage-driver" not in config
    assert existing["runtimes"]["nvidia"] == {"path": "/wrong"}  # the input is not modified
    assert dj.merged({}, {}, "/x", "", " zfs ")["storage-driver"] == "zfs"
    assert "default-runtime" not in dj.merged({}, {}, "/x", "", "")


def test_daemon_json_is_written_as_sorted_json_so_a_second_run_reads_back_the_same_text() -> None:
    text = dj.render(dj.merged({}, SETTINGS, "/usr/bin/nvidia-container-runtime", "nvidia"))
    assert text.endswith("}\n") and text.startswith('{\n  "default-runtime": "nvidia",\n')
    assert dj.render(dj.merged(json.loads(text), SETTINGS, "/usr/bin/nvidia-container-runtime", "nvidia")) == text


mf = _load("managed_files", "library", "managed_files")


def test_managed_files_writes_a_file_only_when_its_content_mode_or_owner_differ(tmp_path: Path) -> None:
    dest = tmp_path / "limits.conf"
    spec = {"dest": str(dest), "content": "* soft memlock unlimited\n"}
    assert mf.ensure_file(spec, check=True) and not dest.exists()  # check mode writes nothing
    assert mf.ensure_file(spec)
    assert dest.read_text() == "* soft memlock unlimited\n" and (dest.stat().st_mode & 0o7777) == 0o644
    assert not mf.ensure_file(spec)
    dest.chmod(0o600)
    assert mf.ensure_file(spec) and (dest.stat().st_mode & 0o7777) == 0o644
    assert mf.ensure_file({**spec, "content": "* soft memlock 64\n"}) and dest.read_text() == "* soft memlock 64\n"
    assert not mf.ensure_file({**spec, "content": "* soft memlock 64\n", "mode": "0644"})
    assert [p.name for p in tmp_path.iterdir()] == ["limits.conf"]  # no temporary file left behind
    with pytest.raises(FileNotFoundError, match="list it in directories"):
        mf.ensure_file({"dest": str(tmp_path / "missing" / "x.conf"), "content": ""})


def test_managed_files_creates_a_directory_with_its_mode_and_fixes_a_wrong_one(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "system.conf.d"
    assert mf.ensure_directory({"path": str(path)}, check=True) and not path.exists()
    assert mf.ensure_directory({"path": str(path)}) and (path.stat().st_mode & 0o7777) == 0o755
    assert not mf.ensure_directory({"path": str(path)})
    assert mf.ensure_directory({"path": str(path), "mode": "0775"}) and (path.stat().st_mode & 0o7777) == 0o775
    assert not mf.ensure_directory({"path": str(path), "mode": "0775", "group": "root"})


fm = _load("nvidia_fabricmanager", "library", "nvidia_fabricmanager_match")


def test_fabric_manager_matches_the_driver_on_the_upstream_version_only() -> None:
    assert fm.mismatch("580.159.04-0ubuntu1", "580.159.04-1") is None
    message = fm.mismatch("580.159.04-0ubuntu1", "580.95.05-0ubuntu1")
    assert message is not None and message.startswith("driver 580.159.04-0ubuntu1 and Fabric Manager 580.95.05")
    assert "nvidia_driver_version" in message
