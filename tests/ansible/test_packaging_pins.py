"""Version pins as site facts and the decisions behind a locked package set (no test host: pure functions).

The site's `versions` link DOCA-OFED and MLNX_OFED as NVIDIA's release notes pair them; pinned_packages renders a
set's apt preferences and tells the set's own holds (held where its preferences pinned them: a site version
bump, moved on purpose) from someone else's (refused).
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from provision.site.versions import Versions
from tests.ansible.test_helper_modules import pp

SET = [{"name": "nvidia-driver-cuda", "version": "580.159.04-1"},
       {"name": "nvidia-fabricmanager-580", "version": "580.95.05-0ubuntu0.22.04.*"},
       {"name": "jq", "version": ""}]


def test_the_mlnx_ofed_version_follows_from_the_doca_release() -> None:
    assert Versions(doca_ofed="2.9.1").ofed == "24.10-1.1.4.0"  # the 4-part form of MLNX_OFED's paths
    assert Versions(doca_ofed="2.9.1", ofed="24.10-1.1.4").ofed == "24.10-1.1.4.0"  # as ofed_info prints it
    # the pairs NVIDIA's driver-container release manifests name (provision/site/versions.py cites them)
    assert [Versions(doca_ofed=doca).ofed for doca in ("2.9.0", "2.9.3", "2.10.0")] == [
        "24.10-0.7.0.0", "24.10-3.2.5.0", "25.01-0.6.0.0"]


@pytest.mark.parametrize(("given", "message"), [
    ({"doca_ofed": "2.9.1", "ofed": "24.10-2.1.8.0"}, "is not the MLNX_OFED of DOCA 2.9.1 (24.10-1.1.4.0"),
    ({"doca_ofed": "9.9.9"}, "doca_ofed 9.9.9 has no known MLNX_OFED release"),
    ({"ofed": "24.10"}, "is not an MLNX_OFED version like 24.10-1.1.4.0"),
    ({"dcgm": "latest"}, "String should match pattern"),
])
def test_versions_that_do_not_fit_together_are_refused_at_load(given: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(")):
        Versions(**given)


def test_the_preferences_pin_every_versioned_package_of_the_set() -> None:
    text = pp.preferences(SET, "nvidia_driver_version")
    assert "Package: nvidia-driver-cuda\nPin: version 580.159.04-1\nPin-Priority: 1001\n" in text
    assert "Pin: version 580.95.05-0ubuntu0.22.04.*" in text and "jq" not in text
    assert pp.parse_preferences(text) == {"nvidia-driver-cuda": "580.159.04-1",
                                          "nvidia-fabricmanager-580": "580.95.05-0ubuntu0.22.04.*"}


def _state(held: str) -> dict[str, object]:
    query = f"nvidia-driver-cuda\t{held}\thold ok installed\n"
    state: dict[str, object] = pp.pinned_packages_decide(query, [SET[0]], True, "nvidia_driver_version")
    return state


def test_a_set_held_where_its_own_preferences_pinned_it_moves_to_the_new_pin() -> None:
    previous = pp.preferences([{"name": "nvidia-driver-cuda", "version": "580.95.05-1"}], "")
    plan = pp.upgrade(_state("580.95.05-1"), previous)
    assert plan == {"owned": True, "install": ["nvidia-driver-cuda=580.159.04-1"]}


def test_a_hold_the_preferences_do_not_account_for_is_someone_else_s_and_refused() -> None:
    previous = pp.preferences([{"name": "nvidia-driver-cuda", "version": "580.159.04-1"}], "")
    assert pp.upgrade(_state("580.95.05-1"), previous)["owned"] is False  # held by hand at another version
    assert pp.upgrade(_state("580.95.05-1"), "")["owned"] is False  # no preferences of the set's own
