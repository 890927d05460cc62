"""The MAAS simulator's API as MAAS describes its own: the handlers and actions the simulator serves, in the
shape of MAAS's `GET /MAAS/api/2.0/describe/` document, which python-libmaas and MAAS's CLI read first and
build their calls from.

The shape is MAAS's (maasserver/api/doc.py `_describe_api`, doc_handler.py `describe`; a real MAAS 2.2
document is canonical/python-libmaas maas/client/bones/testing/api22.raw.json): `doc`, `hash` (SHA-1 of
the description), `resources` sorted by name, each `{name, anon, auth}` with either handler null, and
`handlers` (anon handlers, then auth ones) for older clients; a handler is `{name, doc, params, path, uri,
actions}`, its `uri` absolute, built from the request's own scheme and host; an action is `{name, method,
op, restful, doc}`. The handlers and actions are this simulator's own (a subset of MAAS's), and the server
routes requests through this same table, so the document lists exactly what the simulator answers.
MAAS's documents are AGPL text, so the docs here are the simulator's own words.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

API_ROOT = "/MAAS/api/2.0"


@dataclass(frozen=True)
class Action:
    name: str  # MAAS's action name: read/create/update/delete for the RESTful ones, else the op
    method: str
    op: str | None
    doc: str
    serves: str  # the name of the simulator's method that answers it (sim/maas/server.py)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "method": self.method, "op": self.op, "restful": self.op is None,
                "doc": self.doc}


@dataclass(frozen=True)
class Handler:
    name: str  # MAAS's handler class name, from which clients name the resource (python-libmaas: "Machines")
    path: str  # under the API root, with {param} for each part of the URI
    doc: str
    actions: tuple[Action, ...]

    @property
    def params(self) -> list[str]:
        return re.findall(r"\{(\w+)\}", self.path)

    @property
    def full_path(self) -> str:
        return f"{API_ROOT}/{self.path}"

    def match(self, path: str) -> dict[str, str] | None:
        pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.full_path))
        m = re.fullmatch(pattern, path)
        return m.groupdict() if m else None

    def action(self, method: str, op: str | None) -> Action | None:
        return next((a for a in self.actions if a.method == method and a.op == op), None)

    def describe(self, base: str) -> dict[str, Any]:
        return {"name": self.name, "doc": self.doc, "params": self.params, "path": self.full_path,
                "uri": base + self.full_path, "actions": [a.describe() for a in self.actions]}


@dataclass(frozen=True)
class Resource:
    """One API resource: what it answers without credentials (`anon`) and with them (`auth`)."""

    anon: Handler | None
    auth: Handler | None

    @property
    def name(self) -> str:
        handler = self.auth or self.anon
        assert handler is not None
        return handler.name


_CREATE_DOC = (
    "Enlist a machine. architecture and mac_addresses (repeated, one per MAC) are required; hostname, "
    "power_type (redfish, ipmi or manual) and the power settings, each as power_parameters_{name} or all of "
    "them as one JSON object in power_parameters, are optional; commission (true or false) says whether "
    "commissioning starts at once."
)

VERSION = Handler("VersionHandler", "version/", "This MAAS's version and capabilities.", (
    Action("read", "GET", None, "Read the version, subversion and capabilities.", "version"),
))
ANON_MACHINES = Handler("AnonMachinesHandler", "machines/", "Anonymous access to machines: enlistment.", (
    Action("create", "POST", None, _CREATE_DOC + " An anonymous enlistment stays New for an admin to "
           "accept (commission defaults to false; when true, commissioning ends in New).", "create_anonymous"),
))
MACHINES = Handler("MachinesHandler", "machines/", "The machines this MAAS manages.", (
    Action("read", "GET", None, "List machines, filtered by hostname, id or mac_address (each repeatable).",
           "list_machines"),
    Action("create", "POST", None, _CREATE_DOC + " commission defaults to true.", "create"),
    Action("allocate", "POST", "allocate", "Allocate a Ready machine, chosen by system_id or name.",
           "allocate"),
))
MACHINE = Handler("MachineHandler", "machines/{system_id}/", "One machine, by its system_id.", (
    Action("read", "GET", None, "Read the machine.", "read_machine"),
    Action("delete", "DELETE", None, "Delete the machine.", "delete_machine"),
    Action("commission", "POST", "commission", "Commission the machine: power it on to PXE-boot, then Ready.",
           "commission"),
    Action("deploy", "POST", "deploy", "Deploy an operating system (osystem, distro_series, user_data).",
           "deploy"),
    Action("release", "POST", "release", "Release the machine: power it off and return it to Ready.",
           "release"),
    Action("query_power_state", "GET", "query_power_state",
           "Ask the machine's power driver for its power state (unknown for the manual driver).",
           "query_power_state"),
))

RESOURCES = tuple(sorted((Resource(VERSION, None), Resource(ANON_MACHINES, MACHINES), Resource(None, MACHINE)),
                         key=lambda r: r.name))


def resolve(path: str) -> tuple[Resource, dict[str, str]] | None:
    """The resource a request path names, with its URI parameters."""
    for resource in RESOURCES:
        handler = resource.auth or resource.anon
        assert handler is not None
        params = handler.match(path)
        if params is not None:
            return resource, params
    return None


def describe(base: str) -> dict[str, Any]:
    """MAAS's `describe/` document for this API, its URIs under `base` (scheme://host[:port])."""
    resources = [{"name": r.name, "anon": r.anon.describe(base) if r.anon else None,
                  "auth": r.auth.describe(base) if r.auth else None} for r in RESOURCES]
    document: dict[str, Any] = {
        "doc": "MAAS API",
        "resources": resources,
        "handlers": [r["anon"] for r in resources if r["anon"]] + [r["auth"] for r in resources if r["auth"]],
    }
    # MAAS hashes the description before it makes the URIs absolute: the same hash whichever host asked.
    relative = [[r.name, r.anon.describe("") if r.anon else None, r.auth.describe("") if r.auth else None]
                for r in RESOURCES]
    document["hash"] = hashlib.sha1(json.dumps(relative, sort_keys=True).encode()).hexdigest()
    return document
