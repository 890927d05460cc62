"""`--hosts` patterns: globs, Slurm ranges, racks and hostfiles; a pattern that names nothing is an error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from provision.errors import HostSelectionError
from provision.site import load_site
from provision.site.select import expand_ranges, select_hosts

SIM_SITE = Path(__file__).resolve().parents[2] / "inventory" / "sim" / "site.yml"


def _names(pattern: str | None) -> list[str]:
    return [h.hostname for h in select_hosts(load_site(SIM_SITE), pattern)]


def test_no_pattern_means_every_gpu_host() -> None:
    names = _names(None)
    assert len(names) == 16 and "ctl-01" not in names


def test_globs_ranges_and_racks() -> None:
    assert _names("gpu-r1-0[1-3]") == ["gpu-r1-01", "gpu-r1-02", "gpu-r1-03"]
    assert _names("gpu-r2-[01,07-08]") == ["gpu-r2-01", "gpu-r2-07", "gpu-r2-08"]
    assert _names("rack:r2,gpu-r1-0*")[:2] == ["gpu-r1-01", "gpu-r1-02"]
    assert len(_names("rack:r2,gpu-r1-0*")) == 17
    assert _names("ctl-01") == ["ctl-01"]


def test_a_hostfile_in_any_golden_format(tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# golden\ngpu-r1-02 slots=2\ngpu-r1-01 slots=2\n\n")
    assert _names(f"@{hostfile}") == ["gpu-r1-01", "gpu-r1-02"]


@pytest.mark.parametrize(("pattern", "message"), [("gpu-r9-*", "matches no host"), ("rack:r7", "matches no host"),
                                                  ("gpu-r1-[05-02]", "backwards"), ("@/nonexistent", "cannot read")])
def test_patterns_that_name_nothing_are_errors(pattern: str, message: str) -> None:
    with pytest.raises(HostSelectionError, match=message):
        _names(pattern)


def test_range_expansion_keeps_zero_padding() -> None:
    assert expand_ranges("n[08-10]x") == ["n08x", "n09x", "n10x"]


@pytest.mark.parametrize("pattern", ["", " ", ",", " , "])
def test_an_empty_pattern_is_an_error_not_every_host(pattern: str) -> None:
    # `--hosts "$UNSET"` must not mean the whole site (for `power off`, say).
    with pytest.raises(HostSelectionError, match="names no host"):
        select_hosts(load_site(SIM_SITE), pattern, everyone=True)


def test_without_a_pattern_server_commands_take_every_host_and_gpu_commands_the_gpu_hosts() -> None:
    site = load_site(SIM_SITE)
    assert [h.hostname for h in select_hosts(site, None, everyone=True)] == [h.hostname for h in site.hosts()]
    assert "ctl-01" in [h.hostname for h in select_hosts(site, None, everyone=True)]
    assert "ctl-01" not in [h.hostname for h in select_hosts(site, None)]


def test_a_slurm_hostfile_from_provision_golden_is_read_as_its_hosts(tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("gpu-r1-[01-02],gpu-r2-07\n")  # `provision golden --format slurm`
    assert _names(f"@{hostfile}") == ["gpu-r1-01", "gpu-r1-02", "gpu-r2-07"]


@pytest.mark.parametrize("pattern", ["gpu-r1-[1-2-3]", "gpu-r1-[01,]", "gpu-r1-[-3]"])
def test_a_malformed_range_is_a_selection_error_not_a_crash(pattern: str) -> None:
    with pytest.raises(HostSelectionError, match="is not N or N-M"):
        _names(pattern)


# Bounded inputs (issue 16): a selection is a clear error long before it costs memory or minutes.


@pytest.mark.parametrize("pattern", ["gpu-r1-[0-99999999]", "gpu-r1-[01-60000],gpu-r2-[01-60000]",
                                     "gpu-r1-[0-999999999999]"])
def test_a_range_that_names_more_hosts_than_any_site_holds_is_refused_before_it_is_expanded(pattern: str) -> None:
    with pytest.raises(HostSelectionError, match="names more than 100000 hosts"):
        _names(pattern)


def test_a_range_with_more_digits_than_a_host_number_has_is_malformed_not_a_crash() -> None:
    with pytest.raises(HostSelectionError, match="is not N or N-M"):
        _names("gpu-r1-[0-" + "9" * 5000 + "]")  # int() of 5000 digits is a ValueError


def test_a_range_of_globs_is_bounded_too() -> None:
    with pytest.raises(HostSelectionError, match="a range of globs may name at most 1000"):
        _names("gpu-*-[0-5000]")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_a_hostfile_that_is_a_device_is_refused_without_reading_it(device: str) -> None:
    with pytest.raises(HostSelectionError, match="character device: only a regular file is read"):
        _names(f"@{device}")


def test_a_hostfile_that_is_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "hosts"
    os.mkfifo(fifo)
    with pytest.raises(HostSelectionError, match="a pipe"):
        _names(f"@{fifo}")


def test_a_hostfile_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    with hostfile.open("wb") as out:
        out.truncate(16 * 1024 * 1024 + 1)  # sparse: no disk spent
    with pytest.raises(HostSelectionError, match="larger than the 16 MiB limit"):
        _names(f"@{hostfile}")


def test_a_hostfile_of_ranges_shares_the_bound(tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("gpu-r1-[01-60000]\ngpu-r2-[01-60000]\n")
    with pytest.raises(HostSelectionError, match="names more than 100000 hosts"):
        _names(f"@{hostfile}")


def test_a_binary_hostfile_is_a_selection_error(tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_bytes(b"\xff\xfe gpu-r1-01\n")
    with pytest.raises(HostSelectionError, match="not a text file"):
        _names(f"@{hostfile}")
