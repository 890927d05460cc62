#!/usr/bin/python
"""Choose the disks of a RAIDZ pool from `lsblk --json` output, and say why every other disk is left out.

The selection is a pure function (`plan`) over the parsed lsblk tree; the Ansible module around it only
gathers the input and reports. It refuses rather than guesses: when the usable disks do not match the
count the site expects, or when no device holds `/` (so the OS disk cannot be told apart), the plan is
not ok and its message says what was seen and what to fix.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

DOCUMENTATION = r"""
module: zfs_raidz_plan
short_description: Plan a RAIDZ pool over every non-OS data disk
description:
  - Reads C(lsblk --json) (from the host, or given as text) and picks the data disks for a RAIDZ pool.
  - Never picks a disk holding C(/), C(/boot), swap or an md/LVM member of them, a 0-byte or
    virtual-media device, a removable or USB device; nor, unless O(force), a disk already in a pool or
    in use by a mounted filesystem, md array or LVM.
  - Returns the C(zpool create) command; never runs it. When the pool already exists, plans nothing
    and returns C(exists=true).
  - When the pool is not imported but C(zpool import) finds it on the disks (a MAAS redeploy keeps
    the data disks), returns the C(zpool import -N) command instead (C(import=true)): never a create
    over the site's own pool. Disks of another pool stay refused unless named in O(force_disks).
  - With O(force), only the disks named in O(force_disks) are reused: the command gets C(-f) and
    C(prepare) the C(zpool labelclear -f) of those that carry a ZFS label.
options:
  lsblk_json: {type: str, description: lsblk JSON text; read from the host when absent}
  expected_disks: {type: int, required: true, description: data disks the site expects}
  pool: {type: str, default: tank, description: pool name}
  level: {type: str, default: raidz2, choices: [raidz1, raidz2, raidz3], description: RAIDZ level}
  ashift: {type: int, default: 12, description: pool ashift}
  properties: {type: dict, default: {}, description: dataset properties for the pool root (-O)}
  force: {type: bool, default: false, description: reuse the disks named in force_disks (destroys their data)}
  force_disks: {type: list, elements: str, default: [], description: "kernel names (nvme2n1) force may reuse"}
  root_prefix: {type: str, default: "", description: prefix of the host root in mountpoints (containers)}
  by_id: {type: bool, default: true, description: name disks by /dev/disk/by-id links when present}
  check_existing: {type: bool, default: true, description: "look for the pool first; plan nothing when it exists"}
author: bringup
"""

EXAMPLES = r"""
- name: Plan the pool
  zfs_raidz_plan:
    expected_disks: 8
    level: raidz2
  register: plan
"""

RETURN = r"""
ok: {description: whether the plan may be carried out, type: bool, returned: always}
message: {description: what was found, and what to fix when not ok, type: str, returned: always}
selected: {description: chosen disks, type: list, returned: always}
excluded: {description: the other disks with the reason, type: list, returned: always}
command: {description: the zpool create (or import) argv, type: list, returned: always}
import: {description: the site's pool is on the disks, not imported; command imports it, type: bool, returned: always}
prepare: {description: argvs to run before command (labelclear of forced disks), type: list, returned: always}
"""

OS_MOUNTS = frozenset({"/", "/boot", "/boot/efi", "/usr", "/var", "/home", "[SWAP]"})
VIRTUAL_MEDIA = re.compile(r"virtual|file-stor gadget|gadget|idrac|ilo|cdrom|floppy|vmedia", re.IGNORECASE)
MIN_DISKS = {"raidz1": 3, "raidz2": 4, "raidz3": 5}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGTPE]?)(?:i?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}

# Reasons a disk is left out. Those in FORCEABLE give way to force=true.
OS_DISK = "holds the OS"
ZERO_SIZE = "0-byte device"
VIRTUAL = "virtual media"
REMOVABLE = "removable or USB"
IN_POOL = "already in a ZFS pool"
IN_USE = "in use"
FORCEABLE = frozenset({IN_POOL, IN_USE})


class LsblkError(ValueError):
    """The lsblk output could not be read."""


@dataclass(frozen=True)
class Disk:
    name: str
    path: str
    size_bytes: int | None
    model: str
    vendor: str
    tran: str


@dataclass(frozen=True)
class Exclusion:
    disk: str
    reason: str
    detail: str
    forced: bool = False


@dataclass(frozen=True)
class Plan:
    ok: bool
    message: str
    selected: tuple[Disk, ...]
    excluded: tuple[Exclusion, ...]
    command: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)
    prepare: tuple[tuple[str, ...], ...] = ()
    import_: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "message": self.message,
            "selected": [asdict(d) for d in self.selected],
            "excluded": [asdict(e) for e in self.excluded],
            "command": list(self.command),
            "warnings": list(self.warnings),
            "prepare": [list(argv) for argv in self.prepare],
            "import": self.import_,
        }


def parse_size(value: object) -> int | None:
    """Bytes from lsblk's SIZE (an int with --bytes, else "3.5T", "894.3G", "0B")."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    match = _SIZE.match(str(value))
    if match is None:
        return None
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def parse_lsblk(text: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise LsblkError(f"lsblk output is not JSON: {exc}") from None
    devices = data.get("blockdevices") if isinstance(data, dict) else None
    if not isinstance(devices, list):
        raise LsblkError("lsblk output has no 'blockdevices' list")
    return devices


def _short(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _walk(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield node
    for child in node.get("children") or ():
        yield from _walk(child)


def _mounts(node: Mapping[str, Any], root_prefix: str) -> list[str]:
    found = [m for m in (node.get("mountpoints") or []) if m]
    if node.get("mountpoint"):
        found.append(node["mountpoint"])
    if (node.get("fstype") or "") == "swap":
        found.append("[SWAP]")
    if root_prefix:
        found = [m[len(root_prefix):] or "/" if m == root_prefix or m.startswith(root_prefix + "/") else m
                 for m in found]
    return found


def _zfs_whole_disk_layout(node: Mapping[str, Any]) -> bool:
    """ZFS on a whole disk leaves partition 1 (data) and partition 9 (8 MiB reserved)."""
    parts = [c for c in node.get("children") or () if c.get("type") == "part"]
    nine = [p for p in parts if re.search(r"(p|[a-z])9$", _short(str(p.get("name", ""))))]
    return len(parts) == 2 and len(nine) == 1 and parse_size(nine[0].get("size")) == 8 << 20


def _classify(node: Mapping[str, Any], root_prefix: str) -> tuple[str, str] | None:
    name = _short(str(node.get("name", "")))
    size = parse_size(node.get("size"))
    label = f"{node.get('vendor') or ''} {node.get('model') or ''}".strip()
    below = list(_walk(node))
    os_mounts = sorted({m for n in below for m in _mounts(n, root_prefix) if m in OS_MOUNTS})
    if os_mounts:
        holders = sorted({_short(str(n.get("name"))) for n in below[1:] if n.get("type") not in ("part",)})
        via = f" through {', '.join(holders)}" if holders else ""
        return OS_DISK, f"{name} holds {', '.join(os_mounts)}{via}"
    if size == 0:
        return ZERO_SIZE, f"{name} reports size 0 ({label or 'no model'})"
    if label and VIRTUAL_MEDIA.search(label):
        return VIRTUAL, f"{name} is {label}"
    if node.get("rm") in (True, "1", 1) or (node.get("tran") or "") == "usb":
        return REMOVABLE, f"{name} is removable/USB"
    if any((n.get("fstype") or "") == "zfs_member" for n in below) or _zfs_whole_disk_layout(node):
        return IN_POOL, f"{name} carries a ZFS pool label or layout"
    users = sorted({f"{_short(str(n.get('name')))}({n.get('type')})" for n in below[1:]
                    if n.get("type") not in ("part",)})
    parts = [_short(str(n.get("name"))) for n in below[1:] if n.get("type") == "part"]
    if parts:
        users.append(f"partitions {' '.join(parts)}")
    mounts = sorted({m for n in below for m in _mounts(n, root_prefix)})
    fstypes = sorted({str(n.get("fstype")) for n in below if n.get("fstype")})
    if users or mounts or fstypes:
        what = ", ".join(filter(None, [" ".join(users), " ".join(mounts), " ".join(fstypes)]))
        return IN_USE, f"{name} is in use: {what}"
    return None


def _disk(node: Mapping[str, Any], by_id: Mapping[str, str]) -> Disk:
    name = _short(str(node["name"]))
    return Disk(
        name=name,
        path=by_id.get(name, f"/dev/{name}"),
        size_bytes=parse_size(node.get("size")),
        model=str(node.get("model") or "").strip(),
        vendor=str(node.get("vendor") or "").strip(),
        tran=str(node.get("tran") or ""),
    )


def zpool_command(pool: str, level: str, ashift: int, properties: Mapping[str, str],
                  disks: Sequence[Disk], *, force: bool = False) -> tuple[str, ...]:
    argv = ["zpool", "create", *(["-f"] if force else []), "-o", f"ashift={ashift}"]
    for key in sorted(properties):
        argv += ["-O", f"{key}={properties[key]}"]
    return (*argv, pool, level, *(d.path for d in disks))


BY_ID = "/dev/disk/by-id"


def import_command(pool: str) -> tuple[str, ...]:
    """Import without mounting (-N): the datasets' own mountpoints apply when the role mounts them."""
    return ("zpool", "import", "-N", "-d", BY_ID, pool)


def importable_pools(text: str) -> dict[str, list[str]]:
    """Pool name -> member devices, from `zpool import` (no pool argument) output."""
    pools: dict[str, list[str]] = {}
    current: str | None = None
    in_config = False
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] == "pool:" and len(words) == 2:
            current, in_config = words[1], False
            pools[current] = []
        elif current is not None and words == ["config:"]:
            in_config = True
        elif current is not None and in_config and words[0] not in ("NAME", current) \
                and not re.match(r"^(raidz[123]?|mirror|draid[123]?|spares?|logs?|cache|special|dedup)(-|$)", words[0]):
            pools[current].append(words[0])
    return pools


def plan(devices: Iterable[Mapping[str, Any]], *, expected_disks: int, pool: str = "tank",
         level: str = "raidz2", ashift: int = 12, properties: Mapping[str, str] | None = None,
         force: bool | Collection[str] = False, root_prefix: str = "",
         by_id: Mapping[str, str] | None = None) -> Plan:
    """`force`: True reuses every disk in a pool or in use; a collection of disk names only those."""
    by_id = by_id or {}
    forced_names: Collection[str] | None = None if force is True else (force or ())

    def forceable(name: str) -> bool:
        return forced_names is None or name in forced_names

    disks = [d for d in devices if d.get("type") == "disk"]
    selected: list[Disk] = []
    excluded: list[Exclusion] = []
    saw_root = False
    for node in disks:
        verdict = _classify(node, root_prefix)
        if verdict is None:
            selected.append(_disk(node, by_id))
            continue
        reason, detail = verdict
        saw_root = saw_root or (reason == OS_DISK and "/" in detail.split(" holds ", 1)[1].split(", "))
        if reason in FORCEABLE and forceable(_short(str(node["name"]))):
            excluded.append(Exclusion(_short(str(node["name"])), reason, detail, forced=True))
            selected.append(_disk(node, by_id))
        else:
            excluded.append(Exclusion(_short(str(node["name"])), reason, detail))
    left_out = [e for e in excluded if not e.forced]
    summary = "; ".join(f"{e.disk}: {e.detail}" for e in left_out) or "none"
    chosen = ", ".join(d.name for d in selected) or "none"

    def refuse(why: str) -> Plan:
        return Plan(False, f"{why}. Chosen: {chosen}. Left out: {summary}", tuple(selected), tuple(excluded))

    if not saw_root:
        return refuse("no device in the lsblk output holds / (mountpoints missing?), so the OS disk cannot be "
                      "told apart from the data disks: refusing to guess; gather lsblk on the host itself")
    if len(selected) != expected_disks:
        blocked = [e for e in left_out if e.reason in FORCEABLE]
        hint = (" Disks in a pool or in use are kept unless zfs_raidz_force is true and zfs_raidz_force_disks"
                f" names them ({', '.join(e.disk for e in blocked)}; this destroys their data)"
                if blocked else " Check the host class's nvme_data_disks and the disks the host really has")
        usable = f"{len(selected)} {'is' if len(selected) == 1 else 'are'} usable"
        return refuse(f"the site expects {expected_disks} data disks, {usable}.{hint}")
    if len(selected) < MIN_DISKS[level]:
        return refuse(f"{level} needs at least {MIN_DISKS[level]} disks, the site gives {len(selected)}")
    sizes = sorted({d.size_bytes for d in selected if d.size_bytes})
    warnings: tuple[str, ...] = ()
    if sizes and sizes[-1] > sizes[0] * 1.05:
        warnings = (f"data disks differ in size ({sizes[0]} to {sizes[-1]} bytes): RAIDZ uses the smallest",)
    forced = [e for e in excluded if e.forced]
    command = zpool_command(pool, level, ashift, properties or {}, selected, force=bool(forced))
    names = {d.name: d.path for d in selected}
    prepare = tuple(("zpool", "labelclear", "-f", names[e.disk]) for e in forced if e.reason == IN_POOL)
    return Plan(True, f"{level} over {len(selected)} disks: {chosen}", tuple(selected), tuple(excluded),
                command, warnings, prepare)


def disk_ids(directory: str = "/dev/disk/by-id") -> dict[str, str]:
    """Stable names for each disk: wwn- first, then nvme-eui., then any other link."""
    if not os.path.isdir(directory):
        return {}
    rank = ("wwn-", "nvme-eui.", "nvme-", "scsi-", "ata-")
    best: dict[str, tuple[int, str]] = {}
    for link in sorted(os.listdir(directory)):
        if re.search(r"-part[0-9]+$", link):
            continue
        target = os.path.basename(os.path.realpath(os.path.join(directory, link)))
        score = next((i for i, prefix in enumerate(rank) if link.startswith(prefix)), len(rank))
        if target not in best or score < best[target][0]:
            best[target] = (score, os.path.join(directory, link))
    return {name: path for name, (_, path) in best.items()}


LSBLK_ARGV = ["lsblk", "--json", "--bytes", "--output",
              "NAME,TYPE,SIZE,RM,TRAN,VENDOR,MODEL,FSTYPE,MOUNTPOINT"]


def main() -> None:
    # Imported here, not at the top: importing ansible.module_utils patches sys.intern process-wide,
    # and the selection logic above is also imported by tests that share a process with torch.
    from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]

    module = AnsibleModule(
        argument_spec={
            "lsblk_json": {"type": "str"},
            "expected_disks": {"type": "int", "required": True},
            "pool": {"type": "str", "default": "tank"},
            "level": {"type": "str", "default": "raidz2", "choices": sorted(MIN_DISKS)},
            "ashift": {"type": "int", "default": 12},
            "properties": {"type": "dict", "default": {}},
            "force": {"type": "bool", "default": False},
            "force_disks": {"type": "list", "elements": "str", "default": []},
            "root_prefix": {"type": "str", "default": ""},
            "by_id": {"type": "bool", "default": True},
            "check_existing": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    zpool = module.get_bin_path("zpool") if params["check_existing"] else None
    if zpool:
        rc, _, _ = module.run_command([zpool, "list", "-H", "-o", "name", params["pool"]])
        if rc == 0:
            module.exit_json(changed=False, exists=True, ok=True, message=f"pool {params['pool']} exists")
    if params["force"] and not params["force_disks"]:
        module.fail_json(msg="zfs_raidz_force needs zfs_raidz_force_disks: name the disks whose data may be "
                             "destroyed (kernel names, e.g. nvme2n1)", ok=False)
    others: dict[str, list[str]] = {}
    if zpool:
        rc, out, _ = module.run_command([zpool, "import", "-d", BY_ID])
        others = importable_pools(out) if rc == 0 else {}
        if params["pool"] in others:
            module.exit_json(
                changed=False, exists=False, ok=True, selected=[], excluded=[], warnings=[], prepare=[],
                command=list(import_command(params["pool"])), **{"import": True},
                message=f"pool {params['pool']} is on the disks ({', '.join(others[params['pool']])}) but not "
                        "imported (a redeploy keeps the data disks): importing it, not creating one")
    text = params["lsblk_json"]
    if not text:
        rc, text, err = module.run_command(LSBLK_ARGV)
        if rc != 0:
            module.fail_json(msg=f"lsblk failed (rc {rc}): {err.strip()}", ok=False)
    try:
        devices = parse_lsblk(text)
    except LsblkError as exc:
        module.fail_json(msg=str(exc), ok=False)
    result = plan(devices, expected_disks=params["expected_disks"], pool=params["pool"], level=params["level"],
                  ashift=params["ashift"], properties={str(k): str(v) for k, v in params["properties"].items()},
                  force=set(params["force_disks"]) if params["force"] else False,
                  root_prefix=params["root_prefix"], by_id=disk_ids() if params["by_id"] else {})
    outcome = result.as_dict()
    if others and not result.ok:
        outcome["message"] += (f". Importable pools on this host's disks: {', '.join(sorted(others))}, not the "
                               f"site's {params['pool']}")
    module.exit_json(changed=False, exists=False, **outcome)


if __name__ == "__main__":
    main()
