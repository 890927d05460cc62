"""UFM readers on real captures: event.log (native, syslog-forwarded), REST events, links, ports."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from fabric.errors import ParseError
from fabric.topology import End
from fabric.ufm.events import UfmEvent, iter_event_log, parse_event_log, parse_rest_events
from fabric.ufm.portrefs import PortRef, event_ports, port_from_label
from fabric.ufm.resources import parse_link_cables, parse_ufm_ports
from tests.fabric.ports.helpers import FIXTURES, realdata

CAST = "3_ufm/ufm-event-log-syslog-lines__IBM-CAST__docs-tests-PR419.txt"
REST_624 = "3_ufm/ufm-rest-events__docs.nvidia.com-ufmenterpriserestapiv6242-events-rest-api.json"
REST_LEGACY = "3_ufm/ufm-rest-events__docs.nvidia.com-ufmenterpriserestapiv6120-events-rest-api_legacy-schema.json"
LINKS = "3_ufm/ufm-rest-links__docs.nvidia.com-ufmenterpriserestapiv6200-links-rest-api_NDR-sw-ufm-ndr03.json"
IMBUE = FIXTURES / "ufm-event-log-messages__imbue-ai-cluster-health__find_problematic_events.txt"


def _one(line: str) -> UfmEvent:
    [event] = parse_event_log(line).events
    return event


@pytest.mark.realdata
def test_syslog_forwarded_lines_wrapped_or_joined_read_as_the_same_event() -> None:
    log = parse_event_log(realdata(CAST), "cast")
    downed = [e for e in log.events if e.code == 112]
    assert [e.line for e in downed] == [2, 7]  # the doc's 4-line wrap, and the same line joined
    assert downed[0][:-1] == downed[1][:-1]
    assert downed[0].time == datetime(2016, 10, 17, 15, 56, 33, 245000, tzinfo=UTC)
    assert event_ports(downed[0]).ports == (
        PortRef("248a0703006d40f0", "c931ibsw-leaf01", 16, None, False),
        PortRef(None, "c931f03p08 HCA-1", 1, None, True))
    assert [e.code for e in log.events if e.object_type == "Grid"] == [627, 627]


@pytest.mark.realdata
def test_an_event_body_without_its_timestamp_is_set_apart_with_the_reason() -> None:
    log = parse_event_log(realdata(CAST), "cast")
    reasons = {r.line: r.reason for r in log.rejected}
    assert "without its timestamp" in reasons[9]
    assert {1, 6, 8, 10} <= set(reasons)  # the capture's own '# ---' notes: not events, said so


@pytest.mark.realdata
def test_cast_link_went_down_names_both_ends_by_guid_port_and_name() -> None:
    body = realdata(CAST).splitlines()[8]
    ports = event_ports(_one("2018-11-27 16:23:09.423 " + body)).ports
    assert ports == (PortRef("f4521403008817f0", "mellanox-SX6036", 12, None, False),
                     PortRef("e41d2d0300a4f482", "fsgb001 HCA-1", 1, None, True))


def test_imbue_messages_give_both_ends_labels_and_the_cable_serial() -> None:
    link_down, flapping = [m for m in IMBUE.read_text().splitlines() if m]
    ev = _one(f"2024-06-21 10:00:00.000 [1] [329] WARNING [Fabric_Topology] Link [x]: {link_down}")
    named = event_ports(ev)
    assert named.ports == (PortRef("9c0591030090e000", "T3-E21-N-U47", 33, "1/17/1", False),
                           PortRef("fc6a1c0300244e00", "T4-E45-L-U51", 8, "1/4/2", False))
    assert named.cable_serial == "MT2330FT09118"
    ev = _one("2024-06-21 10:00:01.000 [2] [702] WARNING [Fabric_Notification] IBPort "
              f"[default / Switch: T2-E63-L-U38 / 1/19/2] [dev_id: 0c42a10300000000]: {flapping}")
    named = event_ports(ev)
    assert named.reason == "FLAPPING"
    assert [(p.name, p.port) for p in named.ports] == [("T2-E63-L-U38", 38), ("T2-E63-L-U37", 38)]


def test_port_labels_follow_the_split_port_numbering() -> None:
    assert [port_from_label(s) for s in ("1/17/1", "1/4/2", "1/3/1", "1/16", "7", "x/1")] == [33, 8, 5, 16, 7, None]


def test_truncated_and_garbled_lines_are_rejected_with_their_line_never_dropped() -> None:
    text = ("2026-12-01 15:00:00.000 [1] [329] WARNING [Fabric_Topo\n"
            "\x00\x1b[0m garbage\n"
            "2026-13-45 10:00:00.000 [2] [110] WARNING [Hardware] IBPort [default / Switch: s / NA / 1]: x\n"
            "2026-12-01 10:00:00.000 [3] [110] WARNING [Hardware] IBPort [default / Switch: s / NA / 1]: ok\n")
    items = list(iter_event_log(text.splitlines(), "log"))
    assert [type(i).__name__ for i in items] == ["Rejected", "Rejected", "Rejected", "UfmEvent"]
    assert "impossible timestamp" in items[2].reason  # type: ignore[union-attr]


def test_event_times_are_read_in_the_ufm_servers_zone() -> None:
    line = "2023-12-20 07:46:24.442 [1] [110] WARNING [Hardware] IBPort [default / Switch: s / NA / 1]: x"
    [ev] = parse_event_log(line, tz=ZoneInfo("America/Los_Angeles")).events
    assert ev.time.astimezone(UTC) == datetime(2023, 12, 20, 15, 46, 24, 442000, tzinfo=UTC)


@pytest.mark.realdata
@pytest.mark.parametrize(("name", "codes", "ids"), [(REST_624, [67, 66], [97213, 97214]),
                                                      (REST_LEGACY, [352, 901], [227, 228])])
def test_rest_events_read_both_schemas(name: str, codes: list[int], ids: list[int]) -> None:
    log = parse_rest_events(realdata(name))
    assert [e.code for e in log.events] == codes
    assert [e.entry_id for e in log.events] == ids
    assert not log.rejected


def test_rest_events_without_code_or_time_are_rejected_and_non_json_is_an_error() -> None:
    text = json.dumps([{"event_type": "x", "timestamp": "2024-05-28 08:03:05"}, {"type": "329"}, 3,
                       {"event_type": "329", "timestamp": "2024-05-28 08:03:05", "object_name": "0c42a10300000000_5",
                        "object_path": "default(2)", "description": "Link went down"}])
    log = parse_rest_events(text)
    assert len(log.rejected) == 3
    assert log.events[0].dev_id == "0c42a10300000000"
    assert event_ports(log.events[0]).ports == (PortRef("0c42a10300000000", None, 5),)
    with pytest.raises(ParseError, match="not JSON"):
        parse_rest_events("<html>503</html>")


@pytest.mark.realdata
def test_links_extras_read_the_vendor_example_despite_its_trailing_comma() -> None:
    extras = parse_link_cables(realdata(LINKS))
    assert extras.notes and "trailing comma" in extras.notes[0]
    port = extras.ports[End("900a840300ac8c40", 5)]
    assert (port.name, port.label, port.node_description) == ("900a840300ac8c40_5", "1/3/1", "sw-ufm-ndr03:1/3/1")


def test_ufm_ports_read_state_labels_and_cable_serials() -> None:
    text = json.dumps([
        {"guid": "0c42a10300000000", "number": 5, "name": "0c42a10300000000_5", "dname": "1/3/1",
         "node_description": "leaf-1:1/3/1", "system_name": "leaf-1", "logical_state": "Active",
         "physical_state": "LinkUp", "cable_info": {"serial_number": "MT2330FT09118"}},
        {"name": "0c42a10300000000_6", "logical_state": "Down", "physical_state": "Disabled"},
        {"guid": "nothex", "number": "x"},
    ])
    ports = parse_ufm_ports(text)
    first = ports.ports[End("0c42a10300000000", 5)]
    assert (first.cable_serial, first.disabled) == ("MT2330FT09118", False)
    assert ports.ports[End("0c42a10300000000", 6)].disabled
    assert len(ports.rejected) == 1
