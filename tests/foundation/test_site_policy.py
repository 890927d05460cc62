"""The site's PXE policy: pxe-boot's override mode and what it does to servers already on are site
decisions with today's behaviour as defaults (UEFI; ForceOff, wait, On), validated like every field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provision.bmc import PowerPolicy, PxeStep, RunOptions
from provision.errors import SiteError
from provision.site import load_site
from provision.state import StateStore
from tests.foundation.test_site_validation import _good, _write


def _site(tmp_path: Path, policy: dict[str, Any] | None) -> Path:
    data = _good()
    if policy is not None:
        data["policy"] = policy
    return _write(tmp_path, data)


def test_pxe_policy_defaults_are_uefi_and_off_then_on(tmp_path: Path) -> None:
    policy = load_site(_site(tmp_path, None)).spec.policy
    assert policy.pxe_boot_mode == "UEFI"
    assert policy.pxe_power_policy == "off-on"


@pytest.mark.parametrize(("field", "value"), [("pxe_boot_mode", "BIOS"), ("pxe_boot_mode", "uefi"),
                                              ("pxe_power_policy", "cycle")])
def test_unknown_pxe_policy_values_are_refused_with_their_path(tmp_path: Path, field: str, value: str) -> None:
    with pytest.raises(SiteError) as info:
        load_site(_site(tmp_path, {field: value}))
    assert len(info.value.problems) == 1
    assert f"policy.{field}: Input should be" in info.value.problems[0]


@pytest.mark.parametrize(
    ("policy", "options", "expected"),
    [
        ({}, RunOptions(), ("UEFI", PowerPolicy.off_on)),
        ({"pxe_boot_mode": "Legacy", "pxe_power_policy": "restart"}, RunOptions(), ("Legacy", PowerPolicy.restart)),
        ({"pxe_boot_mode": "keep"}, RunOptions(), (None, PowerPolicy.off_on)),
        ({"pxe_boot_mode": "Legacy", "pxe_power_policy": "restart"},
         RunOptions(boot_mode="UEFI", power_policy=PowerPolicy.off_on), ("UEFI", PowerPolicy.off_on)),
        ({}, RunOptions(boot_mode="keep"), (None, PowerPolicy.off_on)),
    ],
    ids=["defaults", "site", "site keeps the mode", "options override the site", "options keep the mode"],
)
def test_pxe_boot_takes_the_site_policy_unless_the_run_overrides_it(
    tmp_path: Path, policy: dict[str, Any], options: RunOptions, expected: tuple[str | None, PowerPolicy]
) -> None:
    site = load_site(_site(tmp_path, policy))
    assert PxeStep(site, StateStore(tmp_path / "s.db"), options).pxe_settings() == expected
