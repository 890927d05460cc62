"""The site index lets lifecycle commands skip re-validation only while the file is unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.errors import SiteError
from provision.site.index import load_index
from tests.sites import copy_sim_site

REPO = Path(__file__).resolve().parents[2]


def test_index_matches_the_site_and_is_reused(tmp_path: Path) -> None:
    site = copy_sim_site(tmp_path)
    first = load_index(site)
    assert first.name == "sim" and len(first.hosts) == 17
    assert first.host("gpu-r2-08") is not None and first.host("gpu-r2-08").gpus == 2  # type: ignore[union-attr]
    assert first.host("ctl-01").gpus == 0  # type: ignore[union-attr]
    assert list((tmp_path / "state" / ".site-cache").glob("site-*.index.json"))
    assert load_index(site) == first


def test_an_edited_site_is_validated_again(tmp_path: Path) -> None:
    site = copy_sim_site(tmp_path)
    load_index(site)
    site.write_text(site.read_text().replace("address: 127.0.16.3,", "address: 127.0.16.999,"))
    with pytest.raises(SiteError, match="not an IP address or hostname"):
        load_index(site)


def test_a_corrupt_index_falls_back_to_full_validation(tmp_path: Path) -> None:
    site = copy_sim_site(tmp_path)
    load_index(site)
    for f in (tmp_path / "state" / ".site-cache").glob("*.json"):
        f.write_text("{not json")
    assert len(load_index(site).hosts) == 17
