"""MACs and GUIDs have one contract each (`provision/state/identifiers.py`), and no other module keeps a
spelling of its own: a MAC or GUID normalised by hand somewhere else is how the BMC's, MAAS's and the
switches' views of one NIC stopped comparing equal."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fabric.parsers.common import norm_guid
from provision.state.identifiers import canonical_guid, canonical_mac, guid_0x, nic_mac

REPO = Path(__file__).resolve().parents[2]
IDENTIFIERS = REPO / "provision" / "state" / "identifiers.py"

# What spelling an identifier by hand looks like: a 12-hex-digit MAC pattern, a GUID padded to 16 digits, the
# `0x` stripped off a GUID, a MAC's separators swapped, a GUID's colons (sysfs's spelling) dropped.
HAND_MADE = re.compile(r"""\{12\}|zfill\(16\)|removeprefix\(["']0x["']\)|replace\(["']-["'], ["']:["']\)|replace\(["']:["'], ["']["']\)""")
# Modules another change of issue #39 holds while this one lands; each still spells GUIDs by hand.
NOT_YET: dict[str, str] = {
    "fabric/burnin/lft.py": "the LFT dump's GUIDs padded by hand",
}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("B8:CE:F6:94:F0:B8", "b8:ce:f6:94:f0:b8"),
        ("b8-ce-f6-94-f0-b8", "b8:ce:f6:94:f0:b8"),
        ("B8CEF694F0B8", "b8:ce:f6:94:f0:b8"),
        ("00:00:00:00:00:00", None),
        ("01:00:5e:00:00:01", None),  # multicast
        ("not a mac", None),
        (None, None),
        (1234, None),
    ],
)
def test_a_nic_mac_is_unicast_non_zero_in_one_spelling(raw: Any, expected: str | None) -> None:
    assert nic_mac(raw) == expected


def test_a_switch_table_mac_keeps_its_multicast_bit_in_the_same_spelling() -> None:
    # ntc-templates' real SONiC capture (tests/fixtures/ethernet) holds 11:22:33:44:55:66
    assert canonical_mac("1122.3344.5566") == "11:22:33:44:55:66" and nic_mac("1122.3344.5566") is None
    assert canonical_mac("5087.89A1.DE75") == nic_mac("50-87-89-a1-de-75") == "50:87:89:a1:de:75"
    assert canonical_mac("50:87:89:a1:de") is None and canonical_mac("zz:87:89:a1:de:75") is None


@pytest.mark.parametrize("text", ["0x98039B03009FBE9A", "98039b03009fbe9a", "9803:9b03:009f:be9a",
                                  " 0x98039b03009fbe9a "])
def test_every_spelling_of_a_guid_is_16_lower_case_hex_digits(text: str) -> None:
    assert canonical_guid(text) == "98039b03009fbe9a"
    assert guid_0x(canonical_guid(text) or "") == "0x98039b03009fbe9a"


def test_a_short_guid_is_padded_and_a_redacted_one_is_not_a_guid() -> None:
    assert canonical_guid("0x2c90000000001") == "0002c90000000001"  # ibsim's and UFM's short spelling
    for bad in ("", "0x", "0xXXXXXXXXXXXXXXXX", "98039b03009fbe9a00", None):
        assert canonical_guid(bad) is None
    assert norm_guid("0xXXXXXXXXXXXXXXXX") == ("0xXXXXXXXXXXXXXXXX", False)  # the parsers' key for it
    assert norm_guid("0x98039B03009FBE9A") == ("98039b03009fbe9a", True)


def _product_modules() -> list[Path]:
    return sorted(p for top in ("provision", "fabric", "report", "training", "tools") for p in (REPO / top).rglob("*.py"))


def test_no_module_but_identifiers_spells_a_mac_or_guid_by_hand() -> None:
    found = []
    for path in _product_modules():
        rel = path.relative_to(REPO).as_posix()
        if path == IDENTIFIERS or rel in NOT_YET:
            continue
        found += [f"{rel}:{no}: {line.strip()}" for no, line in enumerate(path.read_text().splitlines(), 1)
                  if HAND_MADE.search(line)]
    assert not found, "normalise through provision.state.identifiers instead:\n" + "\n".join(found)


def test_the_modules_not_yet_moved_still_exist_and_still_need_it() -> None:
    for rel in NOT_YET:
        path = REPO / rel
        assert path.exists() and HAND_MADE.search(path.read_text()), f"{rel} is done: drop it from NOT_YET"
