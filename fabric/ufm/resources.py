"""UFM REST `/ufmRest/resources/ports` and what `/ufmRest/resources/links` adds to the topology.

The topology itself of `/links` is `fabric.parsers.ufm.parse_ufm_links` (reused, not repeated here); this
module reads what a port plan needs besides: each port's UFM name (`<guid>_<port>`), label (`dname`,
"1/3/1"), node description, state, and the cable serial number when UFM reports it. UFM's documented port
objects carry `guid`, `number`, `name`, `dname`, `node_description`, `system_name`, `logical_state`,
`physical_state`; the cable serial is read from `cable_serial_number`, `serial_number` or a nested
`cable_info.serial_number` (no public capture of either endpoint carries one).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fabric.errors import ParseError
from fabric.parsers.common import norm_guid
from fabric.topology import End
from fabric.ufm.events import Rejected
from provision.state.peer_json import JsonTooDeep, loads

_TRAILING_COMMA = re.compile(r",(\s*[\]}])")


@dataclass(frozen=True, slots=True)
class UfmPort:
    end: End
    name: str | None  # "<guid>_<port>"
    label: str | None  # dname, "1/3/1"
    node_description: str | None
    system_name: str | None
    logical_state: str | None
    physical_state: str | None
    cable_serial: str | None

    @property
    def disabled(self) -> bool:
        states = f"{self.logical_state or ''} {self.physical_state or ''}".lower()
        return "disabled" in states


@dataclass(frozen=True)
class UfmPorts:
    ports: Mapping[End, UfmPort]
    rejected: tuple[Rejected, ...] = ()
    notes: tuple[str, ...] = field(default=())


def load_ufm_json(text: str, source: str, what: str) -> tuple[Any, tuple[str, ...]]:
    """JSON of a UFM answer. NVIDIA's own examples end lists with `,]`: accepted, with a note."""
    try:
        return loads(text, what=source), ()
    except JsonTooDeep as e:
        raise ParseError(source, None, f"{e.msg}, refused: expected the answer of {what}") from None
    except json.JSONDecodeError as first:
        fixed = _TRAILING_COMMA.sub(r"\1", text)
        if fixed != text:
            try:
                return json.loads(fixed), (f"{source}: trailing comma before ']' or '}}' ignored",)
            except json.JSONDecodeError:
                pass
        raise ParseError(source, first.lineno, f"not JSON ({first.msg} at column {first.colno}): expected the "
                         f"answer of {what}") from None


def _serial(item: Mapping[str, Any]) -> str | None:
    nested = item.get("cable_info")
    for raw in (item.get("cable_serial_number"), item.get("serial_number"),
                nested.get("serial_number") if isinstance(nested, dict) else None):
        if isinstance(raw, str) and raw.strip() and raw.strip().upper() not in {"N/A", "NA"}:
            return raw.strip()
    return None


def _opt(item: Mapping[str, Any], key: str) -> str | None:
    raw = item.get(key)
    return str(raw) if raw not in (None, "") else None


def parse_ufm_ports(text: str, source: str = "ufm ports") -> UfmPorts:
    """`GET /ufmRest/resources/ports`: one `UfmPort` per port object; bad objects are rejected, not dropped."""
    data, notes = load_ufm_json(text, source, "GET /ufmRest/resources/ports")
    if not isinstance(data, list):
        raise ParseError(source, None, "expected a JSON list of UFM port objects (GET /ufmRest/resources/ports)")
    ports: dict[End, UfmPort] = {}
    rejected: list[Rejected] = []
    for i, item in enumerate(data):
        where = f"{source}[{i}]"
        if not isinstance(item, dict):
            rejected.append(Rejected(where, None, f"expected a port object, got {type(item).__name__}"))
            continue
        raw_guid, raw_port = item.get("guid") or item.get("system_guid"), item.get("number")
        name = _opt(item, "name")
        if (raw_guid is None or raw_port is None) and name and re.fullmatch(r"[0-9a-fA-F]{16}_\d+", name):
            raw_guid, raw_port = name.split("_")
        guid, ok = norm_guid(str(raw_guid)) if raw_guid is not None else ("", False)
        if not ok or not str(raw_port).isdigit():
            rejected.append(Rejected(where, None, f"no port GUID and number (guid {raw_guid!r}, number {raw_port!r})"))
            continue
        end = End(guid, int(str(raw_port)))
        ports[end] = UfmPort(end, name, _opt(item, "dname"), _opt(item, "node_description"),
                             _opt(item, "system_name"), _opt(item, "logical_state"), _opt(item, "physical_state"),
                             _serial(item))
    return UfmPorts(ports, tuple(rejected), tuple(notes))


def parse_link_cables(text: str, source: str = "ufm links") -> UfmPorts:
    """Per-end extras of `GET /ufmRest/resources/links`: port names, labels, cable serial numbers."""
    data, notes = load_ufm_json(text, source, "GET /ufmRest/resources/links")
    if isinstance(data, dict) and isinstance(data.get("links"), list):
        data = data["links"]
    if not isinstance(data, list):
        raise ParseError(source, None, "expected a JSON list of UFM link objects (GET /ufmRest/resources/links)")
    ports: dict[End, UfmPort] = {}
    rejected: list[Rejected] = []
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            rejected.append(Rejected(f"{source}[{i}]", None, f"expected a link object, got {type(item).__name__}"))
            continue
        serial = _serial(item)
        for side in ("source", "destination"):
            guid, ok = norm_guid(str(item.get(f"{side}_guid", "")))
            port = str(item.get(f"{side}_port", ""))
            if not ok or not port.isdigit():
                rejected.append(Rejected(f"{source}[{i}]", None, f"{side} end has no GUID and port number"))
                continue
            end = End(guid, int(port))
            ports[end] = UfmPort(end, _opt(item, f"{side}_port_name"), _opt(item, f"{side}_port_dname"),
                                 _opt(item, f"{side}_port_node_description"), None, None, None, serial)
    return UfmPorts(ports, tuple(rejected), tuple(notes))
