"""`first_link`: the one reading of `Links.Chassis[0]`-style navigation that the harvest (chassis, manager) and the
firmware job queue (the system's manager, else the first of the Managers) share.

Source: a real Supermicro GB300 ComputerSystem (tests/fixtures/redfish/supermicro_gb300/SOURCE.md), whose
`Links.Chassis` and `Links.ManagedBy` are lists of links as DMTF ComputerSystem.v1 declares them.
"""

from __future__ import annotations

import json
from pathlib import Path

from provision.redfish import first_link

SYSTEM = Path(__file__).parents[1] / "fixtures" / "redfish" / "supermicro_gb300" / "_redfish_v1_Systems_System_0.json"


def test_first_link_reads_the_first_member_of_a_real_systems_links() -> None:
    system = json.loads(SYSTEM.read_text())
    assert first_link(system, "Links", "ManagedBy") == "/redfish/v1/Managers/BMC_0"
    assert first_link(system, "Links", "Chassis") == "/redfish/v1/Chassis/BMC_0"


def test_first_link_takes_a_lone_link_and_a_collections_members() -> None:
    assert first_link({"Links": {"Chassis": {"@odata.id": "/redfish/v1/Chassis/1"}}}, "Links", "Chassis") == \
        "/redfish/v1/Chassis/1"
    members = {"Members": [{"@odata.id": "/redfish/v1/Managers/iDRAC.Embedded.1"}, {"@odata.id": "/x"}]}
    assert first_link(members, "Members") == "/redfish/v1/Managers/iDRAC.Embedded.1"


def test_first_link_is_none_where_there_is_no_usable_link() -> None:
    assert first_link({"Links": {"ManagedBy": []}}, "Links", "ManagedBy") is None
    assert first_link({"Links": None}, "Links", "ManagedBy") is None
    assert first_link({}, "Links", "ManagedBy") is None
    assert first_link({"Members": [{"@odata.id": "relative/path"}]}, "Members") is None
    assert first_link({"Members": ["/redfish/v1/Managers/1"]}, "Members") is None
