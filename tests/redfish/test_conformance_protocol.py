"""The simulated iDRAC keeps the parts of DSP0266 that DMTF's Service Validator does not walk: `$metadata`
and the OData service document, session semantics, `Allow`/405, Base registry MessageIds, and values in
the form the schema's own patterns require. Each check names its source; the schemas and the registry
are DMTF's files in tests/fixtures/redfish_dsp8010/ (DSP8010/DSP8011 2025.4, BSD-3)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from provision.site import load_site
from sim.redfish import tree
from sim.redfish.bmc import Settings, SimBmc
from sim.redfish.firmware import attach as attach_firmware
from sim.redfish.firmware_config import site_configs
from sim.redfish.http import Request, Response
from sim.redfish.identity import identity
from sim.redfish.messages import BASE_KEYS, BASE_VERSION
from sim.redfish.metadata import SCHEMAS
from tests.redfish.simlab import write_site

DSP8010 = Path(__file__).resolve().parents[1] / "fixtures" / "redfish_dsp8010"
EDMX = "{http://docs.oasis-open.org/odata/ns/edmx}"
EDM = "{http://docs.oasis-open.org/odata/ns/edm}"
PASSWORD = "pw-protocol"
SESSIONS = tree.SESSIONS


def _bmc(tmp_path: Path) -> SimBmc:
    """One simulated BMC as server.py builds them (firmware.py's UpdateService and TaskService included)."""
    site = load_site(write_site(tmp_path, 1, 8443))
    host = site.hosts()[0]
    bmc = SimBmc(identity(site, host), "root", PASSWORD, Settings(power_delay_s=0.0))
    attach_firmware({host.hostname: bmc}, site_configs(site))
    return bmc


def _call(bmc: SimBmc, method: str, path: str, headers: dict[str, str] | None = None, body: Any = None) -> Response:
    raw = json.dumps(body).encode() if body is not None else b""
    resp = asyncio.run(bmc.handle(Request(method, path, {k.lower(): v for k, v in (headers or {}).items()}, raw)))
    assert isinstance(resp, Response)
    return resp


def _basic() -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"root:{PASSWORD}".encode()).decode()}


def _json(resp: Response) -> Any:
    return json.loads(resp.body)


def _login(bmc: SimBmc) -> tuple[str, str]:
    resp = _call(bmc, "POST", SESSIONS, body={"UserName": "root", "Password": PASSWORD})
    assert resp.status == 201
    return resp.headers["X-Auth-Token"], resp.headers["Location"]


def _served_types(bmc: SimBmc) -> set[str]:
    """Every `@odata.type`, nested ones included, of every resource reachable from the service root (a
    session of ours open, so that the Sessions collection has a member)."""
    _login(bmc)
    found: set[str] = set()
    links: list[str] = ["/redfish/v1/"]
    seen: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("@odata.type"), str):
                found.add(value["@odata.type"].lstrip("#"))
            if isinstance(value.get("@odata.id"), str) and "#" not in value["@odata.id"]:
                links.append(value["@odata.id"])
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    while links:
        path = links.pop()
        if path.rstrip("/") in seen:
            continue
        seen.add(path.rstrip("/"))
        resp = _call(bmc, "GET", path, _basic())
        assert resp.status == 200, path
        walk(_json(resp))
    assert any(t.startswith("UpdateService.") for t in found) and any(t.startswith("Session.") for t in found)
    return found


def test_metadata_and_odata_answer_without_credentials(tmp_path: Path) -> None:
    # DSP0266 "Authentication requirements": /redfish, the service root, /redfish/v1/odata and
    # /redfish/v1/$metadata are readable without authentication; $metadata is XML (its "Service metadata").
    bmc = _bmc(tmp_path)
    meta = _call(bmc, "GET", "/redfish/v1/$metadata")
    assert meta.status == 200 and meta.headers["Content-Type"].startswith("application/xml")
    assert ET.fromstring(meta.body).tag == f"{EDMX}Edmx"
    odata = _call(bmc, "GET", "/redfish/v1/odata")
    assert odata.status == 200
    doc = _json(odata)
    assert doc["@odata.context"] == "/redfish/v1/$metadata"
    # DSP0266 "OData service document": the service root and each resource the root links to, as singletons.
    urls = {v["name"]: v["url"] for v in doc["value"] if v["kind"] == "Singleton"}
    assert urls["Service"] == "/redfish/v1/"
    root = _json(_call(bmc, "GET", "/redfish/v1/"))
    for name in ("Systems", "Chassis", "Managers", "AccountService", "SessionService"):
        assert urls[name] == root[name]["@odata.id"]
    assert urls["Sessions"] == root["Links"]["Sessions"]["@odata.id"]
    assert _call(bmc, "GET", tree.SYSTEM).status == 401


def test_metadata_references_every_namespace_the_resources_use_from_dsp8010(tmp_path: Path) -> None:
    bmc = _bmc(tmp_path)
    doc = ET.fromstring(_call(bmc, "GET", "/redfish/v1/$metadata").body)
    included: dict[str, str] = {}  # namespace → file
    for ref in doc.iter(f"{EDMX}Reference"):
        uri = ref.attrib["Uri"]
        assert uri.startswith("http://redfish.dmtf.org/schemas/v1/"), uri
        name = uri.rsplit("/", 1)[1]
        csdl = DSP8010 / "csdl" / name
        assert csdl.is_file(), f"{name} is referenced by $metadata but not in the DSP8010 subset"
        defined = {s.attrib["Namespace"] for s in ET.parse(csdl).getroot().iter(f"{EDM}Schema")}
        for inc in ref.iter(f"{EDMX}Include"):
            assert inc.attrib["Namespace"] in defined, f"{name} defines no namespace {inc.attrib['Namespace']}"
            included[inc.attrib["Namespace"]] = name
    # The bundle holds exactly what $metadata references: nothing stale travels with the tests.
    assert {p.name for p in (DSP8010 / "csdl").glob("*.xml")} == set(included.values())
    for odata_type in _served_types(bmc):
        namespace = odata_type.rsplit(".", 1)[0]
        assert namespace in included, f"@odata.type {odata_type}: $metadata does not include {namespace}"
        assert namespace.split(".")[0] in included
    # The entity container extends the ServiceRoot version the root claims.
    container = next(doc.iter(f"{EDM}EntityContainer"))
    assert container.attrib["Extends"] == _json(_call(bmc, "GET", "/redfish/v1/"))["@odata.type"][1:].rsplit(
        ".", 1)[0] + ".ServiceContainer"
    assert set(SCHEMAS) <= {n.split(".")[0] for n in included}


def test_session_is_readable_its_token_works_and_delete_logs_it_out(tmp_path: Path) -> None:
    # DSP0266 "Redfish session login authentication": the POST answers 201 with X-Auth-Token and the
    # session's URI in Location; the session is a member of the Sessions collection; DELETE on it ends it.
    bmc = _bmc(tmp_path)
    token, location = _login(bmc)
    auth = {"X-Auth-Token": token}
    members = [m["@odata.id"] for m in _json(_call(bmc, "GET", SESSIONS, auth))["Members"]]
    assert members == [location]
    session = _call(bmc, "GET", location, auth)
    assert session.status == 200
    body = _json(session)
    assert body["@odata.id"] == location and body["UserName"] == "root" and body["Id"] == location.rsplit("/", 1)[1]
    assert "Password" not in body
    assert _call(bmc, "DELETE", location, auth).status == 200
    assert _call(bmc, "GET", tree.SYSTEM, auth).status == 401
    assert _call(bmc, "GET", location, _basic()).status == 404
    assert _call(bmc, "DELETE", location, _basic()).status == 404


def test_another_session_can_end_a_session_and_an_idle_one_expires(tmp_path: Path) -> None:
    bmc = _bmc(tmp_path)
    first, first_uri = _login(bmc)
    second, _ = _login(bmc)
    assert _call(bmc, "DELETE", first_uri, {"X-Auth-Token": second}).status == 200
    assert _call(bmc, "GET", tree.SYSTEM, {"X-Auth-Token": first}).status == 401
    # SessionService.SessionTimeout: "the number of seconds of inactivity that a session can have before
    # the session service closes the session due to inactivity" (SessionService schema).
    timeout = _json(_call(bmc, "GET", "/redfish/v1/SessionService", _basic()))["SessionTimeout"]
    assert timeout == tree.SESSION_TIMEOUT_S
    for s in bmc.sessions.by_token.values():
        s.last_used -= timeout + 1
    assert _call(bmc, "GET", tree.SYSTEM, {"X-Auth-Token": second}).status == 401
    assert len(bmc.sessions) == 0


def test_account_service_its_account_and_roles_are_served(tmp_path: Path) -> None:
    bmc = _bmc(tmp_path)
    service = _json(_call(bmc, "GET", _json(_call(bmc, "GET", "/redfish/v1/"))["AccountService"]["@odata.id"],
                          _basic()))
    accounts = _json(_call(bmc, "GET", service["Accounts"]["@odata.id"], _basic()))["Members"]
    account = _json(_call(bmc, "GET", accounts[0]["@odata.id"], _basic()))
    assert account["UserName"] == "root" and account["Password"] is None  # write-only: null when read
    role = _json(_call(bmc, "GET", account["Links"]["Role"]["@odata.id"], _basic()))
    assert role["RoleId"] == account["RoleId"] == "Administrator"
    roles = {m["@odata.id"] for m in _json(_call(bmc, "GET", service["Roles"]["@odata.id"], _basic()))["Members"]}
    assert {r.rsplit("/", 1)[1] for r in roles} == {"Administrator", "Operator", "ReadOnly"}


def test_get_names_the_allowed_methods_and_others_are_405_with_allow(tmp_path: Path) -> None:
    # DSP0266, Allow response header: returned on GET, and with 405 to name the methods the URI takes.
    bmc = _bmc(tmp_path)
    assert _call(bmc, "GET", tree.SYSTEM, _basic()).headers["Allow"] == "GET, PATCH"
    assert _call(bmc, "GET", SESSIONS, _basic()).headers["Allow"] == "GET, POST"
    refused = _call(bmc, "DELETE", tree.SYSTEM, _basic())
    assert refused.status == 405 and refused.headers["Allow"] == "GET, PATCH"
    assert _json(refused)["error"]["@Message.ExtendedInfo"][0]["MessageId"] == f"Base.{BASE_VERSION}.OperationNotAllowed"
    assert _call(bmc, "GET", tree.RESET, _basic()).headers["Allow"] == "POST"


def test_every_message_id_is_in_the_base_registry_version_it_names(tmp_path: Path) -> None:
    registry = json.loads((DSP8010 / "registries" / f"Base.{BASE_VERSION}.0.json").read_text())
    assert registry["RegistryPrefix"] == "Base" and registry["RegistryVersion"].startswith(BASE_VERSION + ".")
    for key, severity in BASE_KEYS.items():
        assert key in registry["Messages"], f"Base.{BASE_VERSION}.{key} is in no Base {BASE_VERSION} registry"
        entry = registry["Messages"][key]
        assert entry.get("MessageSeverity", entry.get("Severity")) == severity, key
    # The two ids the issue found outside the registry: 405 and a reset the power state refuses.
    bmc = _bmc(tmp_path)
    assert "OperationNotAllowed" in _call(bmc, "PATCH", "/redfish/v1/Systems", _basic()).body.decode()
    reset = _call(bmc, "POST", tree.RESET, _basic(), {"ResetType": "ForceOff"})  # it is off
    assert reset.status == 409
    ids = [i["MessageId"] for i in _json(reset)["error"]["@Message.ExtendedInfo"]]
    assert all(i.split(".", 3)[3] in registry["Messages"] for i in ids), ids


def test_infiniband_guids_follow_the_schema_pattern(tmp_path: Path) -> None:
    schema = ET.parse(DSP8010 / "csdl" / "NetworkDeviceFunction_v1.xml").getroot()
    patterns = {}
    for prop in schema.iter(f"{EDM}Property"):
        if prop.attrib["Name"] in ("NodeGUID", "PermanentNodeGUID", "PortGUID", "PermanentPortGUID"):
            for note in prop.iter(f"{EDM}Annotation"):
                if note.attrib.get("Term") == "Validation.Pattern":
                    patterns[prop.attrib["Name"]] = note.attrib["String"]
    assert len(patterns) == 4
    bmc = _bmc(tmp_path)
    functions = [r for p, r in bmc._tree.items() if "/NetworkDeviceFunctions/InfiniBand." in p]
    assert len(functions) == 2  # write_site's host class has two HCAs
    for f in functions:
        for name, pattern in patterns.items():
            assert re.fullmatch(pattern.strip("^$"), f["InfiniBand"][name]), (name, f["InfiniBand"][name])


@pytest.mark.parametrize("path", ["/redfish/v1/$metadata", "/redfish/v1/odata"])
def test_documents_are_read_only(tmp_path: Path, path: str) -> None:
    refused = _call(_bmc(tmp_path), "POST", path, _basic(), {})
    assert refused.status == 405 and refused.headers["Allow"] == "GET"


def test_a_body_that_is_not_json_is_400_malformed_json_and_a_non_object_misses_its_properties(tmp_path: Path) -> None:
    # DSP0266 (Modification requests; Base registry's MalformedJSON): "The request body submitted was malformed JSON."
    from sim.redfish.firmware_flavours import SIMPLE_UPDATE

    bmc = _bmc(tmp_path)
    headers = {k.lower(): v for k, v in _basic().items()}

    def raw(method: str, path: str, body: bytes) -> Response:
        resp = asyncio.run(bmc.handle(Request(method, path, headers, body)))
        assert isinstance(resp, Response)
        return resp

    def message_key(resp: Response) -> str:
        return str(_json(resp)["error"]["@Message.ExtendedInfo"][0]["MessageId"]).rsplit(".", 1)[1]

    for method, path in (("PATCH", tree.SYSTEM), ("POST", SIMPLE_UPDATE)):
        refused = raw(method, path, b"{not json")
        assert refused.status == 400 and message_key(refused) == "MalformedJSON", path
    assert message_key(raw("PATCH", tree.SYSTEM, b"[1]")) == "PropertyNotWritable"
    assert raw("POST", SIMPLE_UPDATE, b"[1]").status == 400  # no ImageURI in a body that is not an object
