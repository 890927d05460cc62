"""UFM REST `/ufmRest/resources/links` (and optionally `/ufmRest/resources/systems`) JSON -> Topology.

Field names follow UFM's documented link objects (`source_guid`, `source_port`, `destination_guid`,
`destination_port`, `*_port_node_description`, `width`, optional `speed`/`active_speed`); UFM shows a
switch port's node description as `<switch name>:<port>`. Node types come from `/resources/systems`
(`type`: switch/host/gateway) when given, otherwise from the port name (`HCA-2/1` is a CA port).
"""

from __future__ import annotations

import json
import re
from typing import Any

from fabric.errors import ParseError
from fabric.parsers.common import norm_guid
from fabric.speeds import normalise_speed, normalise_width
from fabric.topology import End, Node, NodeType, Topology, TopologyBuilder
from provision.state.peer_json import JsonTooDeep, loads

_SWITCH_PORT_DESC = re.compile(r"^(.*):(\d+(?:/\d+)*)$")
_REQUIRED = ("source_guid", "source_port", "destination_guid", "destination_port")


def _load(text: str, source: str) -> Any:
    try:
        return loads(text, what=source)
    except JsonTooDeep as e:
        raise ParseError(source, None, f"{e.msg}, refused: expected a UFM REST response") from None
    except json.JSONDecodeError as e:
        raise ParseError(source, e.lineno, f"not JSON ({e.msg} at column {e.colno}): expected a UFM REST "
                         "response") from None


def parse_ufm_systems(text: str, source: str = "ufm systems") -> dict[str, tuple[NodeType, str]]:
    data = _load(text, source)
    if isinstance(data, dict):
        data = data.get("systems", data.get("data", list(data.values())))
    if not isinstance(data, list):
        raise ParseError(source, None, "expected a JSON list of UFM system objects")
    out: dict[str, tuple[NodeType, str]] = {}
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            continue
        raw = item.get("guid") or item.get("system_guid")
        if not isinstance(raw, str):
            continue
        t = str(item.get("type", "")).lower()
        ntype = NodeType.SWITCH if t in {"switch", "director"} else NodeType.ROUTER if t == "router" else NodeType.CA
        # UFM puts the switch's own name (which carries its location) in system_name; description is
        # often just the model (MSB7800 in real UFM 5.9/6.1 responses)
        desc = str(item.get("system_name") or item.get("description") or "")
        out[norm_guid(raw)[0]] = (ntype, desc)
        del i
    return out


def parse_ufm_links(text: str, systems_text: str | None = None, source: str = "ufm links") -> Topology:
    data = _load(text, source)
    if isinstance(data, dict) and isinstance(data.get("links"), list):
        data = data["links"]
    if not isinstance(data, list):
        raise ParseError(source, None, "expected a JSON list of UFM link objects (GET /ufmRest/resources/links)")
    systems = parse_ufm_systems(systems_text) if systems_text is not None else {}
    b = TopologyBuilder(source)
    for name, (ntype, desc) in systems.items():
        b.add_node(Node(guid=name, type=ntype, description=desc))
    good = 0
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            b.warn(None, f"entry {i}: expected an object, got {type(item).__name__}; skipped")
            continue
        missing = [k for k in _REQUIRED if k not in item]
        if missing:
            b.warn(None, f"entry {i}: missing {', '.join(missing)}; skipped")
            continue
        try:
            sport, dport = int(str(item["source_port"])), int(str(item["destination_port"]))
        except ValueError:
            b.warn(None, f"entry {i}: ports must be numbers, got {item['source_port']!r}/"
                   f"{item['destination_port']!r}; skipped")
            continue
        ends = []
        for side, port in (("source", sport), ("destination", dport)):
            guid, _ = norm_guid(str(item[f"{side}_guid"]))
            desc = str(item.get(f"{side}_port_node_description", ""))
            dname = str(item.get(f"{side}_port_dname", ""))
            m = _SWITCH_PORT_DESC.match(desc)
            if guid in systems:
                ntype = systems[guid][0]
            elif "HCA" in dname.upper() or (m is None and " " in desc):
                ntype = NodeType.CA
            else:
                ntype = NodeType.SWITCH
            if ntype is NodeType.SWITCH and m:
                desc = m.group(1)
            b.note_peer(guid, ntype, desc)
            ends.append(End(guid, port))
        width = normalise_width(str(item["width"])) if item.get("width") else None
        raw_speed = item.get("speed") or item.get("active_speed")
        speed = normalise_speed(str(raw_speed)) if raw_speed else None
        b.add_port(ends[0], ends[1], width, speed, None)
        b.add_port(ends[1], ends[0], width, speed, None)
        good += 1
    if good == 0 and data:
        raise ParseError(source, None, "no usable link objects: each needs source_guid, source_port, "
                         "destination_guid and destination_port")
    return b.build()
