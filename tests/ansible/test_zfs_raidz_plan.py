"""The zfs_raidz disk selection (roles/zfs_raidz/library/zfs_raidz_plan.py) on real lsblk captures."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
REALDATA = REPO / ".." / "shared" / "realdata" / "7_lsblk"
DISKS = REPO / "sim" / "testhosts" / "disks"


def _load() -> ModuleType:
    path = REPO / "roles" / "zfs_raidz" / "library" / "zfs_raidz_plan.py"
    spec = importlib.util.spec_from_file_location("zfs_raidz_plan", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["zfs_raidz_plan"] = module
    spec.loader.exec_module(module)
    return module


zp = _load()


def capture(name: str) -> list[dict[str, object]]:
    path = REALDATA / name
    if not path.exists():
        pytest.skip(f"real lsblk capture {name} is not available ({REALDATA} absent)")
    devices: list[dict[str, object]] = zp.parse_lsblk(path.read_text(encoding="utf-8"))
    return devices


def reasons(plan: object) -> dict[str, str]:
    return {e.disk: e.reason for e in plan.excluded}  # type: ignore[attr-defined]


@pytest.mark.realdata
def test_mdraid_os_disks_are_never_chosen_and_zfs_labelled_disks_need_force() -> None:
    devices = capture("lsblk-J__github-rust-blockdev-crate__SAMPLE_JSON_8xNVMe-zfs-parts_2xNVMe-mdraid-OS.json")
    plan = zp.plan(devices, expected_disks=8)
    assert not plan.ok
    assert reasons(plan)["nvme3n1"] == zp.OS_DISK and reasons(plan)["nvme2n1"] == zp.OS_DISK
    assert sum(r == zp.IN_POOL for r in reasons(plan).values()) == 8
    assert "zfs_raidz_force" in plan.message

    forced = zp.plan(devices, expected_disks=8, force=True)
    assert forced.ok
    chosen = sorted(d.name for d in forced.selected)
    assert chosen == sorted(f"nvme{n}n1" for n in (0, 1, 4, 5, 6, 7, 8, 9))
    assert forced.command[:5] == ("zpool", "create", "-f", "-o", "ashift=12")
    assert len(forced.prepare) == 8 and all(argv[:3] == ("zpool", "labelclear", "-f") for argv in forced.prepare)
    assert forced.command[-9] == "raidz2" and "/dev/nvme3n1" not in forced.command


@pytest.mark.realdata
def test_os_on_lvm_zero_byte_bmc_disk_and_md_raid0_data_disks() -> None:
    devices = capture("lsblk__leptonai-gpud__pkg_disk_testdata_lsblk.4.json")
    plan = zp.plan(devices, expected_disks=8)
    assert not plan.ok and "8 data disks, 0 are usable" in plan.message
    got = reasons(plan)
    assert got["sda"] == zp.OS_DISK and "ubuntu--vg-ubuntu--lv" in plan.message
    assert got["sdb"] == zp.ZERO_SIZE
    assert all(got[f"nvme{n}n1"] == zp.IN_USE for n in range(8))
    forced = zp.plan(devices, expected_disks=8, force=True, level="raidz1")
    assert forced.ok and len(forced.selected) == 8 and "sda" not in {d.name for d in forced.selected}


@pytest.mark.realdata
def test_virtual_media_gadget_is_left_out() -> None:
    plan = zp.plan(capture("lsblk__leptonai-gpud__pkg_disk_testdata_lsblk.xfs_vfat.json"), expected_disks=1)
    assert reasons(plan)["sda"] in (zp.ZERO_SIZE, zp.VIRTUAL)
    assert reasons(plan)["nvme4n1"] == zp.OS_DISK
    assert not plan.ok


@pytest.mark.realdata
def test_md_raid1_root_on_sata_pair_excludes_both_members() -> None:
    plan = zp.plan(capture("lsblk__leptonai-gpud__pkg_disk_testdata_lsblk.withlv.censored.json"), expected_disks=4)
    got = reasons(plan)
    assert got["sda"] == zp.OS_DISK and got["sdb"] == zp.OS_DISK
    assert got["nvme1n1"] == zp.IN_USE  # ext4 on the whole disk


@pytest.mark.realdata
def test_refuses_when_no_device_holds_root() -> None:
    plan = zp.plan(capture("lsblk__leptonai-gpud__pkg_disk_testdata_lsblk.1.json"), expected_disks=2)
    assert not plan.ok and "holds /" in plan.message and "refusing to guess" in plan.message
    assert plan.command == ()


@pytest.mark.realdata
def test_container_view_with_host_prefix_finds_the_root_disk() -> None:
    devices = capture("lsblk-J__github-go-config-test__Test_avoid_root_volume_container-host-mounts.json")
    plan = zp.plan(devices, expected_disks=3, root_prefix="/.host", force=True, level="raidz1")
    assert reasons(plan)["nvme4n1"] == zp.OS_DISK
    assert {d.name for d in plan.selected} >= {"nvme1n1", "nvme2n1", "nvme3n1"}


@pytest.mark.realdata
def test_sas_boot_disk_and_twelve_nvme_in_md127() -> None:
    devices = capture("lsblk-J__github-go-config-test__Test_raid_nvme_12xNVMe-md127-raid0_SAS-boot.json")
    plan = zp.plan(devices, expected_disks=12, force=True, level="raidz3")
    assert plan.ok and len(plan.selected) == 12
    assert reasons(plan)["sda"] == zp.OS_DISK


def test_test_host_layout_gives_the_four_data_disks() -> None:
    devices = zp.parse_lsblk((DISKS / "hgx-2os-4data.json").read_text(encoding="utf-8"))
    plan = zp.plan(devices, expected_disks=4, properties={"compression": "lz4", "atime": "off"})
    assert plan.ok, plan.message
    assert [d.name for d in plan.selected] == ["nvme2n1", "nvme3n1", "nvme4n1", "nvme5n1"]
    assert plan.command == ("zpool", "create", "-o", "ashift=12", "-O", "atime=off", "-O", "compression=lz4",
                            "tank", "raidz2", "/dev/nvme2n1", "/dev/nvme3n1", "/dev/nvme4n1", "/dev/nvme5n1")
    assert reasons(plan) == {"sda": zp.ZERO_SIZE, "nvme0n1": zp.OS_DISK, "nvme1n1": zp.OS_DISK}


def test_a_mounted_data_disk_makes_the_count_wrong_and_the_plan_refuses() -> None:
    devices = zp.parse_lsblk((DISKS / "hgx-2os-3data-1scratch.json").read_text(encoding="utf-8"))
    plan = zp.plan(devices, expected_disks=4)
    assert not plan.ok and plan.command == ()
    assert "expects 4 data disks, 3 are usable" in plan.message and "/mnt/scratch" in plan.message


def test_too_few_disks_for_the_raidz_level() -> None:
    devices = zp.parse_lsblk((DISKS / "hgx-2os-4data.json").read_text(encoding="utf-8"))
    plan = zp.plan(devices, expected_disks=4, level="raidz3")
    assert not plan.ok and "raidz3 needs at least 5" in plan.message


def test_sizes_parse_in_lsblk_units() -> None:
    assert zp.parse_size("3.5T") == int(3.5 * (1 << 40))
    assert zp.parse_size("894.3G") == int(894.3 * (1 << 30))
    assert zp.parse_size("0B") == 0
    assert zp.parse_size(7681501126656) == 7681501126656
    assert zp.parse_size(None) is None


def test_garbage_is_an_error_not_a_plan() -> None:
    with pytest.raises(zp.LsblkError):
        zp.parse_lsblk("not json")
    with pytest.raises(zp.LsblkError):
        zp.parse_lsblk(json.dumps({"devices": []}))


def _redeployed(other_pool_disks: tuple[str, ...] = ()) -> list[dict[str, object]]:
    """An OS disk and four data disks that carry a whole-disk ZFS layout (the pool outlived a redeploy)."""
    def zfs_disk(name: str) -> dict[str, object]:
        return {"name": name, "type": "disk", "size": 3840755982336, "model": "SAMSUNG MZQL23T8HCLS",
                "children": [{"name": f"{name}p1", "type": "part", "size": 3840738181120, "fstype": "zfs_member"},
                             {"name": f"{name}p9", "type": "part", "size": 8 << 20}]}
    root = {"name": "nvme0n1", "type": "disk", "size": 960197124096, "model": "SAMSUNG MZ1L2960HCJR",
            "children": [{"name": "nvme0n1p1", "type": "part", "size": 1 << 30, "mountpoint": "/boot/efi"},
                         {"name": "nvme0n1p2", "type": "part", "size": 950 << 30, "mountpoint": "/"}]}
    return [root, *(zfs_disk(f"nvme{n}n1") for n in range(2, 6))]


def test_disks_in_a_pool_are_refused_and_force_reuses_only_the_disks_it_names() -> None:
    devices = _redeployed()
    refused = zp.plan(devices, expected_disks=4)
    assert not refused.ok and set(reasons(refused).values()) >= {zp.IN_POOL}
    assert "zfs_raidz_force_disks" in refused.message and "nvme2n1" in refused.message
    partly = zp.plan(devices, expected_disks=4, force={"nvme2n1", "nvme3n1"})
    assert not partly.ok and not partly.command
    forced = zp.plan(devices, expected_disks=4, force={"nvme2n1", "nvme3n1", "nvme4n1", "nvme5n1"})
    assert forced.ok and forced.command[:3] == ("zpool", "create", "-f")
    assert [argv[-1] for argv in forced.prepare] == [f"/dev/nvme{n}n1" for n in range(2, 6)]
    assert all(argv[:3] == ("zpool", "labelclear", "-f") for argv in forced.prepare)
    clean = zp.plan(_redeployed()[:1] + [{"name": f"nvme{n}n1", "type": "disk", "size": 3840755982336}
                                         for n in range(2, 6)], expected_disks=4)
    assert clean.ok and clean.command[:3] == ("zpool", "create", "-o") and clean.prepare == ()


ZPOOL_IMPORT_LISTING = """\
   pool: tank
     id: 1234567890
  state: ONLINE
 action: The pool can be imported using its name or numeric identifier.
 config:

\ttank                        ONLINE
\t  raidz2-0                  ONLINE
\t    nvme-eui.0001-part1     ONLINE
\t    nvme-eui.0002-part1     ONLINE

   pool: scratch
     id: 42
  state: ONLINE
 action: The pool can be imported using its name or numeric identifier.
 config:

\tscratch          ONLINE
\t  mirror-0       ONLINE
\t    nvme-eui.0005  ONLINE
"""


def test_importable_pools_are_read_from_zpool_import() -> None:
    assert zp.importable_pools(ZPOOL_IMPORT_LISTING) == {
        "tank": ["nvme-eui.0001-part1", "nvme-eui.0002-part1"], "scratch": ["nvme-eui.0005"]}
    assert zp.importable_pools("no pools available to import\n") == {}
    assert zp.import_command("tank") == ("zpool", "import", "-N", "-d", "/dev/disk/by-id", "tank")


def _run_module(tmp_path: Path, listing: str, **args: object) -> dict[str, object]:
    """The module itself (ansible ad-hoc on localhost) with a zpool on PATH that lists `listing`."""
    import os
    import subprocess

    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (tmp_path / "listing").write_text(listing)
    zpool = fake / "zpool"
    zpool.write_text(f"""#!/bin/sh
case "$1" in
  list) echo "cannot open '$5': no such pool" >&2; exit 1 ;;
  import) if [ -s {tmp_path / 'listing'} ]; then cat {tmp_path / 'listing'}; exit 0; else echo "no pools available to import"; exit 1; fi ;;
esac
exit 1
""")
    zpool.chmod(0o755)
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{fake}:{bin_dir}:{os.environ.get('PATH', '')}",
           "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_LIBRARY": str(REPO / "roles" / "zfs_raidz" / "library"),
           "ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STRATEGY": "linear"}
    done = subprocess.run(
        [str(bin_dir / "ansible"), "localhost", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}",
         "-m", "zfs_raidz_plan", "-a", json.dumps({"lsblk_json": json.dumps({"blockdevices": _redeployed()}),
                                                   "by_id": False, **args})],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    result: dict[str, object] = json.loads(done.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return result


def test_the_sites_pool_on_the_disks_is_imported_not_created(tmp_path: Path) -> None:
    found = _run_module(tmp_path, ZPOOL_IMPORT_LISTING, expected_disks=4, pool="tank")
    assert found["ok"] is True and found["import"] is True and found["exists"] is False
    assert found["command"] == ["zpool", "import", "-N", "-d", "/dev/disk/by-id", "tank"]
    assert "not imported" in str(found["message"])


def test_disks_of_another_pool_stay_refused_and_force_must_name_them(tmp_path: Path) -> None:
    other = _run_module(tmp_path, ZPOOL_IMPORT_LISTING.replace("tank", "olddata"), expected_disks=4, pool="tank")
    assert other["ok"] is False and other["import"] is False
    assert "Importable pools on this host's disks: olddata, scratch" in str(other["message"])
    unnamed = _run_module(tmp_path, "", expected_disks=4, pool="tank", force=True)
    assert unnamed.get("failed") is True and "zfs_raidz_force_disks" in str(unnamed["msg"])
    named = _run_module(tmp_path, "", expected_disks=4, pool="tank", force=True,
                        force_disks=["nvme2n1", "nvme3n1", "nvme4n1", "nvme5n1"])
    assert named["ok"] is True and list(named["command"])[:3] == ["zpool", "create", "-f"]  # type: ignore[call-overload]
    assert len(named["prepare"]) == 4  # type: ignore[arg-type]
