"""Nothing of a rejected site file is cached, caches are 0600, an inline secret is named but not echoed."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.errors import SiteError
from provision.site import load_site
from tests.sites import copy_sim_site

INLINE = "hunter2-inline-Secret"


def _cache_files(site: Path) -> list[Path]:
    return [p for p in (site.parent / "state" / ".site-cache").glob("*") if p.is_file()]


def test_a_site_with_an_inline_password_is_refused_and_nothing_of_it_is_cached(tmp_path: Path) -> None:
    site = copy_sim_site(tmp_path / "sim")
    site.write_text(site.read_text().replace("password: {env: BRINGUP_SIM_BMC_PASSWORD}", f"password: {INLINE}"))
    for _ in range(2):  # the second load must not find a cache either
        with pytest.raises(SiteError) as caught:
            load_site(site)
        message = str(caught.value)
        assert "credentials.bmc-default.password" in message and "inline secret" in message, message
        assert INLINE not in message
    leaked = [p for p in _cache_files(site) if INLINE.encode() in p.read_bytes()]
    assert leaked == [], f"a rejected file's secret was cached: {leaked}"


def test_an_inline_api_key_is_not_echoed_either(tmp_path: Path) -> None:
    site = copy_sim_site(tmp_path / "sim")
    site.write_text(site.read_text().replace("api_key: {env: BRINGUP_SIM_MAAS_API_KEY}", f"api_key: {INLINE}"))
    with pytest.raises(SiteError) as caught:
        load_site(site)
    assert "maas.api_key" in str(caught.value) and INLINE not in str(caught.value)


def test_cache_files_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    site = copy_sim_site(tmp_path / "sim")
    load_site(site)
    files = _cache_files(site)
    assert files, "a valid site leaves its caches"
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in files} == {p.name: "0o600" for p in files}
