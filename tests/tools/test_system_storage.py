"""Swap, governor, clock, peermem, fabric manager, docker, disk and zpool checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.health import catalog, storage, system
from tools.health.collectors import cpu_governors, proc_file
from tools.health.errors import ParseError
from tools.health.outcome import CRITICAL, NOT_APPLICABLE, OK, UNKNOWN, WARN

from .conftest import expectations, realdata, replay_text


def test_lent_h200_swap_off_and_peermem_absent() -> None:
    assert system.parse_swap(replay_text("h200x2-healthy", "proc-swaps"), 0, expectations()).status == OK
    outcome = system.parse_peermem(replay_text("h200x2-healthy", "proc-modules"), 0, expectations())
    assert (outcome.status, outcome.reason) == (WARN, "peermem_not_loaded")


def test_proc_collectors_count_lines_and_swap_on_is_flagged(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/swaps").write_text(
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/swap.img file\t\t8388604\t\t0\t\t-2\n")
    (tmp_path / "proc/modules").write_text(
        "nvidia_peermem 16384 0 - Live 0xffffffffc1000000 (OE)\nnvidia 14299136 1 nvidia_peermem, Live 0x0 (O)\n")
    swaps = proc_file("proc/swaps", "proc-swaps")(tmp_path)[0]
    assert swaps.startswith("# proc-swaps v1 lines=2\n")
    assert system.parse_swap(swaps, 0, expectations()).reason == "swap_on"
    assert system.parse_swap(swaps, 0, expectations(system={"swap_allowed": True})).status == OK
    modules = proc_file("proc/modules", "proc-modules")(tmp_path)[0]
    assert system.parse_peermem(modules, 0, expectations()).status == OK


def test_governor(tmp_path: Path) -> None:
    exp = expectations(system={"cpu_governor": "performance"})
    for i, gov in enumerate(("performance", "powersave")):
        d = tmp_path / f"sys/devices/system/cpu/cpu{i}/cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text(gov + "\n")
    outcome = system.parse_governor(cpu_governors(tmp_path)[0], 0, exp)
    assert (outcome.status, outcome.evidence) == (WARN, ("cpu1 powersave",))
    vm = system.parse_governor(replay_text("h200x2-healthy", "cpu-governor"), 0, exp)
    assert vm.status == NOT_APPLICABLE and "32 CPUs" in vm.summary


def test_clock_sync_from_adjtimex_state() -> None:
    unsynced = replay_text("h200x2-healthy", "adjtimex")  # the lent VM's kernel clock is not disciplined
    assert system.parse_clock(unsynced, 0, expectations()).reason == "clock_unsynchronised"
    synced = "adjtimex state=0 status=0x2001 maxerror_us=12000 esterror_us=40\n"
    assert system.parse_clock(synced, 0, expectations()).status == OK


def test_fabric_manager_states() -> None:
    exp = expectations()
    assert system.parse_fabricmanager("active\n", 0, exp).status == OK
    assert system.parse_fabricmanager("inactive\n", 3, exp).reason == "fabric_manager_down"
    assert system.parse_fabricmanager("failed\n", 3, exp).status == CRITICAL
    with pytest.raises(ParseError):
        system.parse_fabricmanager("aktiv\n", 0, exp)


def test_docker_gpu_run() -> None:
    exp = expectations()
    listing = ("GPU 0: NVIDIA H200 (UUID: GPU-7b66e46d-ebaf-2948-8250-6dba0a140392)\n"
               "GPU 1: NVIDIA H200 (UUID: GPU-c8045656-c1db-d6d0-8d7b-a4b8a670341e)\n")
    assert system.parse_docker(listing, 0, exp).status == OK
    assert system.parse_docker(listing.splitlines()[0] + "\n", 0, exp).reason == "docker_gpus"
    toolkit = ("docker: Error response from daemon: could not select device driver \"\" with capabilities: "
               "[[gpu]].\n")
    assert system.parse_docker(toolkit, 125, exp).status == CRITICAL
    with pytest.raises(ParseError, match="docker itself failed"):
        system.parse_docker("Cannot connect to the Docker daemon at unix:///var/run/docker.sock.\n", 1, exp)


@pytest.mark.realdata
def test_df_of_the_lent_machine() -> None:
    rows = storage.parse_df(realdata("h200x2-captured-2026-11-29/df.txt"))
    assert [r.mount for r in rows] == ["/dev/shm", "/", "/mnt/sandboxing/model_tools_env/v1/python"]
    outcome = storage.parse_disk(replay_text("h200x2-healthy", "df"), 0, expectations())
    assert outcome.status == OK and outcome.metrics == (("disk_used_pct_max", pytest.approx(11.17, abs=0.01)),)


def test_full_disk_and_localised_header() -> None:
    full = "Filesystem 1-blocks Used Available Capacity Mounted on\n/dev/nvme0n1p2 1000 960 40 96% /\n"
    assert storage.parse_disk(full, 0, expectations()).reason == "disk_full"
    german = "Dateisystem 1-Blöcke Benutzt Verfügbar Kapazität Eingehängt auf\n/dev/vda 1000 10 990 1% /\n"
    with pytest.raises(ParseError, match="C locale"):
        storage.parse_disk(german, 0, expectations())


ZPOOL_OK = """  pool: data
 state: ONLINE
  scan: scrub repaired 0B in 00:10:02 with 0 errors on Sun Nov  8 00:34:03 2026
config:

\tNAME         STATE     READ WRITE CKSUM
\tdata         ONLINE       0     0     0
\t  raidz1-0   ONLINE       0     0     0
\t    nvme0n1  ONLINE       0     0     0
\t    nvme1n1  ONLINE       0     0     0

errors: No known data errors
"""


def test_zpool_online_degraded_and_missing() -> None:
    exp = expectations(storage={"zpools": ["data"]})
    assert storage.parse_zpool(ZPOOL_OK, 0, exp).status == OK
    degraded = ZPOOL_OK.replace(" state: ONLINE", " state: DEGRADED").replace(
        "nvme1n1  ONLINE       0     0     0", "nvme1n1  FAULTED      3    80     0")
    outcome = storage.parse_zpool(degraded, 0, exp)
    assert outcome.reason == "zpool_unhealthy" and "nvme1n1  FAULTED      3    80     0" in outcome.evidence
    assert storage.parse_zpool("no pools available\n", 0, exp).reason == "zpool_missing"
    with pytest.raises(ParseError):
        storage.parse_zpool(ZPOOL_OK[:60], 0, exp)


def test_zpool_is_run_with_exact_counts() -> None:
    probe = catalog.probes(expectations(storage={"zpools": ["data"]}))["zpool-status"]
    assert probe.argv == ("zpool", "status", "-p")


def test_zpool_suffixed_error_counts_are_read() -> None:
    # Without -p, zpool prints 1536 checksum errors as "1.50K"; the pool and its errors line still look clean.
    assert [storage.zpool_count(c) for c in ("0", "999", "1.50K", "12K", "2.00M", "?", "-", "")] == [
        0, 999, 1536, 12288, 2097152, None, None, None]
    text = ZPOOL_OK.replace("nvme1n1  ONLINE       0     0     0", "nvme1n1  ONLINE       0     0 1.50K")
    outcome = storage.parse_zpool(text, 0, expectations(storage={"zpools": ["data"]}))
    assert (outcome.status, outcome.reason) == (WARN, "zpool_unhealthy")
    assert "nvme1n1  ONLINE       0     0 1.50K" in outcome.evidence


def test_zpool_error_cell_that_cannot_be_read_is_unknown_never_ok() -> None:
    text = ZPOOL_OK.replace("nvme1n1  ONLINE       0     0     0", "nvme1n1  ONLINE       0     0   n/a")
    outcome = storage.parse_zpool(text, 0, expectations(storage={"zpools": ["data"]}))
    assert (outcome.status, outcome.reason) == (UNKNOWN, "zpool_counts_unread")
    assert outcome.evidence == ("nvme1n1  ONLINE       0     0   n/a",)


def test_zpool_prose_above_the_config_is_not_read_as_devices() -> None:
    text = ZPOOL_OK.replace("config:\n", "action: Wait for the resilver to complete.\n\tdisk ONLINE soon\nconfig:\n")
    assert storage.parse_zpool(text, 0, expectations(storage={"zpools": ["data"]})).status == OK
