"""The multi-BMC simulator behaves like an iDRAC: shapes, auth, sessions, ETags, Once override, power."""

from __future__ import annotations

import asyncio
import json
import resource
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from provision.site import load_site
from sim.redfish.faults import FaultFileError, parse_faults
from sim.redfish.identity import identity, mac_for
from sim.redfish.tree import static_tree
from tests.redfish.simlab import SimProcess, free_port, new_password, write_site

IDRAC = Path(__file__).resolve().parents[2] / ".." / "shared" / "realdata" / "2_redfish" / "dell_idrac9_r650"
SYSTEM = "/redfish/v1/Systems/System.Embedded.1"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimProcess, Path, str]]:
    d = tmp_path_factory.mktemp("simbehaviour")
    password = new_password()
    site = write_site(d, 3, free_port())
    with SimProcess(site, password, d / "run", power_delay_ms=300) as proc:
        yield proc, site, password


def request(site: Path, host: int, method: str, path: str, password: str | None, **kw: Any) -> httpx.Response:
    s = load_site(site)
    h = s.hosts()[host]
    auth = ("root", password) if password is not None else None
    with httpx.Client(base_url=f"https://{h.bmc.address}:{h.bmc.port}", verify=False, auth=auth) as c:
        return c.request(method, path, **kw)


def test_macs_and_serials_are_deterministic_and_unique_at_512_hosts(tmp_path: Path) -> None:
    site = load_site(write_site(tmp_path, 512, 8443))
    idents = [identity(site, h) for h in site.hosts()]
    again = [identity(site, h) for h in site.hosts()]
    assert idents == again
    macs = [n.mac for i in idents for n in i.nics]
    assert len(set(macs)) == len(macs) == 512 * 4
    assert all(int(m[:2], 16) & 0b11 == 0b10 for m in macs)  # locally administered unicast
    assert len({i.service_tag for i in idents}) == 512
    assert mac_for("other-site", "h000", "NIC.Integrated.1-1-1") != idents[0].nics[2].mac


@pytest.mark.realdata
@pytest.mark.skipif(not IDRAC.is_dir(), reason="real iDRAC captures not present")
def test_resource_shapes_use_the_real_idrac_property_names(tmp_path: Path) -> None:
    site = load_site(write_site(tmp_path, 1, 8443))
    tree = static_tree(identity(site, site.hosts()[0]), frozenset())
    pairs = {
        "redfish_v1_Systems_System.Embedded.1_EthernetInterfaces_NIC.Integrated.1-1-1.json":
            f"{SYSTEM}/EthernetInterfaces/NIC.Integrated.1-1-1",
        "redfish_v1_Systems_System.Embedded.1_EthernetInterfaces.json": f"{SYSTEM}/EthernetInterfaces",
        "redfish_v1_Chassis_System.Embedded.1_NetworkAdapters_NIC.Integrated.1_NetworkDeviceFunctions_"
        "NIC.Integrated.1-1-1.json":
            "/redfish/v1/Chassis/System.Embedded.1/NetworkAdapters/NIC.Integrated.1/NetworkDeviceFunctions/"
            "NIC.Integrated.1-1-1",
        "redfish_v1_Chassis_System.Embedded.1_NetworkAdapters.json": "/redfish/v1/Chassis/System.Embedded.1/NetworkAdapters",
    }
    for file, path in pairs.items():
        real = json.loads((IDRAC / file).read_text())
        ours = tree[path]
        invented = set(ours) - set(real)
        assert not invented, f"{path}: properties no real iDRAC sends: {invented}"
        assert ours["@odata.type"].split(".")[0] == real["@odata.type"].split(".")[0]


def test_fault_file_names_are_checked() -> None:
    assert parse_faults("faults: {h000: [http_503, slow]}")["h000"] == {"http_503", "slow"}
    with pytest.raises(FaultFileError, match="known: wrong_password"):
        parse_faults("faults: {h000: [melted]}")


def test_service_root_is_open_and_everything_else_needs_credentials(sim: tuple[SimProcess, Path, str]) -> None:
    _, site, password = sim
    assert request(site, 0, "GET", "/redfish/v1/", None).status_code == 200
    denied = request(site, 0, "GET", SYSTEM, None)
    assert denied.status_code == 401
    assert denied.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "Base.1.13.NoValidSession"
    assert request(site, 0, "GET", SYSTEM, "wrong").status_code == 401
    assert request(site, 0, "GET", SYSTEM, password).status_code == 200


def test_sessions_are_limited_and_deletable(sim: tuple[SimProcess, Path, str]) -> None:
    proc, site, password = sim
    s = load_site(site)
    h = s.hosts()[2]
    with httpx.Client(base_url=f"https://{h.bmc.address}:{h.bmc.port}", verify=False) as c:
        made = []
        for _ in range(16):
            r = c.post("/redfish/v1/SessionService/Sessions", json={"UserName": "root", "Password": password})
            assert r.status_code == 201
            made.append((r.headers["X-Auth-Token"], r.headers["Location"]))
        over = c.post("/redfish/v1/SessionService/Sessions", json={"UserName": "root", "Password": password})
        assert over.status_code == 400 and "maximum number" in over.text
        assert c.get(SYSTEM, headers={"X-Auth-Token": made[0][0]}).status_code == 200
        for token, location in made:
            assert c.delete(location, headers={"X-Auth-Token": token}).status_code == 200
    assert proc.hosts()[h.hostname]["sessions"] == 0


def test_stale_etag_is_refused_and_once_override_clears_after_boot(sim: tuple[SimProcess, Path, str]) -> None:
    proc, site, password = sim
    first = request(site, 1, "GET", SYSTEM, password)
    etag = first.headers["ETag"]
    boot = {"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}
    assert request(site, 1, "PATCH", SYSTEM, password, json=boot, headers={"If-Match": etag}).status_code == 200
    stale = request(site, 1, "PATCH", SYSTEM, password, json=boot, headers={"If-Match": etag})
    assert stale.status_code == 412
    bad = request(site, 1, "PATCH", SYSTEM, password, json={"Boot": {"BootSourceOverrideTarget": "Floppy2"}})
    assert bad.status_code == 400 and "PropertyValueNotInList" in bad.text
    assert request(site, 1, "GET", SYSTEM, password).json()["Boot"]["BootSourceOverrideTarget"] == "Pxe"
    reset = request(site, 1, "POST", f"{SYSTEM}/Actions/ComputerSystem.Reset", password, json={"ResetType": "On"})
    assert reset.status_code == 204
    assert request(site, 1, "GET", SYSTEM, password).json()["PowerState"] == "PoweringOn"
    again = request(site, 1, "POST", f"{SYSTEM}/Actions/ComputerSystem.Reset", password, json={"ResetType": "On"})
    assert again.status_code == 409
    for _ in range(50):
        state = request(site, 1, "GET", SYSTEM, password).json()
        if state["PowerState"] == "On":
            break
        asyncio.run(asyncio.sleep(0.05))
    assert state["PowerState"] == "On"
    assert state["Boot"]["BootSourceOverrideEnabled"] == "Disabled"
    assert state["Boot"]["BootSourceOverrideTarget"] == "None"
    assert proc.hosts()[load_site(site).hosts()[1].hostname]["boots"] == ["Pxe"]


def test_expand_inlines_subordinate_resources(sim: tuple[SimProcess, Path, str]) -> None:
    _, site, password = sim
    r = request(site, 0, "GET", f"{SYSTEM}/EthernetInterfaces?$expand=.($levels=1)", password).json()
    assert all("MACAddress" in m for m in r["Members"])
    plain = request(site, 0, "GET", f"{SYSTEM}/EthernetInterfaces", password).json()
    assert all(set(m) == {"@odata.id"} for m in plain["Members"])


def test_expand_period_inlines_every_link_outside_links_and_tilde_only_those_inside(
    sim: tuple[SimProcess, Path, str]
) -> None:
    _, site, password = sim
    chassis_link = {"@odata.id": "/redfish/v1/Chassis/System.Embedded.1"}
    period = request(site, 0, "GET", f"{SYSTEM}?$expand=.", password).json()
    assert "Attributes" in period["Bios"] and "Members" in period["EthernetInterfaces"]
    assert all(set(m) == {"@odata.id"} for m in period["EthernetInterfaces"]["Members"])  # one level only
    assert period["Links"]["Chassis"] == [chassis_link]
    tilde = request(site, 0, "GET", f"{SYSTEM}?$expand=~", password).json()
    assert set(tilde["Bios"]) == {"@odata.id"}
    assert tilde["Links"]["Chassis"][0]["NetworkAdapters"] and tilde["Links"]["ManagedBy"][0]["FirmwareVersion"]
    star = request(site, 0, "GET", f"{SYSTEM}/EthernetInterfaces?$expand=*($levels=2)", password).json()
    nic = star["Members"][0]
    assert nic["MACAddress"] and nic["Links"]["Chassis"]["SerialNumber"]  # level 2: the member's Links too
    deep = request(site, 0, "GET", "/redfish/v1/Chassis/System.Embedded.1/NetworkAdapters?$expand=.($levels=3)",
                   password).json()
    functions = deep["Members"][0]["NetworkDeviceFunctions"]["Members"]
    assert all("NetDevFuncType" in f for f in functions)
    assert set(functions[0]["Links"]["PhysicalPortAssignment"]) == {"@odata.id"}  # inside Links: not with '.'


def test_expanded_power_state_is_never_served_stale(sim: tuple[SimProcess, Path, str]) -> None:
    _, site, password = sim
    before = request(site, 2, "GET", "/redfish/v1/Systems?$expand=.", password).json()["Members"][0]["PowerState"]
    request(site, 2, "POST", f"{SYSTEM}/Actions/ComputerSystem.Reset", password,
            json={"ResetType": "On" if before == "Off" else "ForceOff"})
    for _ in range(100):
        now = request(site, 2, "GET", "/redfish/v1/Systems?$expand=.", password).json()["Members"][0]["PowerState"]
        if now in ("On", "Off") and now != before:
            break
        asyncio.run(asyncio.sleep(0.05))
    assert now != before


def test_select_returns_the_named_properties_and_the_odata_ones(sim: tuple[SimProcess, Path, str]) -> None:
    _, site, password = sim
    r = request(site, 0, "GET", f"{SYSTEM}?$select=PowerState,Status/Health,Nothing", password)
    assert r.json() == {"@odata.context": "/redfish/v1/$metadata#ComputerSystem.ComputerSystem",
                        "@odata.id": SYSTEM, "@odata.type": "#ComputerSystem.v1_12_0.ComputerSystem",
                        "PowerState": r.json()["PowerState"], "Status": {"Health": "OK"}}
    assert r.headers["ETag"]
    macs = request(site, 0, "GET", f"{SYSTEM}/EthernetInterfaces?$select=MACAddress&$expand=.", password).json()
    assert all(set(m) == {"@odata.context", "@odata.id", "@odata.type", "MACAddress"} for m in macs["Members"])


def test_only_answers_the_single_member_of_a_collection(sim: tuple[SimProcess, Path, str]) -> None:
    _, site, password = sim
    assert request(site, 0, "GET", "/redfish/v1/Systems?only", password).json()["@odata.id"] == SYSTEM
    many = request(site, 0, "GET", f"{SYSTEM}/EthernetInterfaces?only", password).json()
    assert len(many["Members"]) > 1  # more than one member: the collection itself


@pytest.mark.parametrize(
    ("query", "status", "message_id"),
    [
        ("$expand=.($levels=7)", 400, "Base.1.13.QueryParameterOutOfRange"),  # MaxLevels is 6
        ("$expand=.($levels=0)", 400, "Base.1.13.QueryParameterOutOfRange"),
        ("$expand=Bios", 400, "Base.1.13.QueryParameterValueFormatError"),
        ("only=1", 400, "Base.1.13.QueryParameterValueFormatError"),
        ("only&$expand=.", 400, "Base.1.13.QueryCombinationInvalid"),
        ("$filter=SystemType%20eq%20'Physical'", 501, "Base.1.13.QueryNotSupported"),  # FilterQuery: false
        ("$top=1", 501, "Base.1.13.QueryNotSupported"),
    ],
)
def test_query_parameters_the_service_does_not_take_are_refused_as_dsp0266_says(
    sim: tuple[SimProcess, Path, str], query: str, status: int, message_id: str
) -> None:
    _, site, password = sim
    r = request(site, 0, "GET", f"/redfish/v1/Systems?{query}", password)
    assert r.status_code == status
    assert r.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == message_id


def test_unknown_query_parameters_without_a_dollar_are_ignored(sim: tuple[SimProcess, Path, str]) -> None:
    _, site, password = sim
    assert request(site, 0, "GET", "/redfish/v1/Systems?excerpt&foo=bar", password).json()["Members"] == [
        {"@odata.id": SYSTEM}]


def test_certificate_verifies_against_the_simulator_ca(sim: tuple[SimProcess, Path, str]) -> None:
    proc, site, _ = sim
    h = load_site(site).hosts()[0]
    ctx = ssl.create_default_context(cafile=str(proc.ca))
    with httpx.Client(verify=ctx) as c:
        assert c.get(f"https://{h.bmc.address}:{h.bmc.port}/redfish/v1/").status_code == 200
    with httpx.Client(verify=True) as c, pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        c.get(f"https://{h.bmc.address}:{h.bmc.port}/redfish/v1/")


def test_the_simulator_lifts_its_open_file_limit_to_the_hard_one(tmp_path: Path) -> None:
    # 512 BMCs are 512 listening sockets before the first connection: a 1,024 soft limit is not enough.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = 256 if hard == resource.RLIM_INFINITY else min(256, hard - 1)  # always below the hard limit
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
    try:
        proc = SimProcess(write_site(tmp_path, 2, free_port()), new_password(), tmp_path / "run")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    with proc:
        line = next(x for x in Path(f"/proc/{proc.proc.pid}/limits").read_text().splitlines()
                    if x.startswith("Max open files"))
        child_soft, child_hard = line.split()[3:5]
        assert child_soft == child_hard != str(low)
