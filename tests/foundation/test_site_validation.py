"""The site loader accepts the shipped sites and names every problem of a bad one with its path."""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.errors import SiteError
from provision.site import load_site

REPO = Path(__file__).resolve().parents[2]


def _good() -> dict[str, Any]:
    return {
        "name": "lab",
        "credentials": {"bmc": {"username": "root", "password": {"env": "LAB_BMC_PASSWORD"}}},
        "host_classes": {
            "hgx": {
                "gpu": {"model": "NVIDIA H100 80GB HBM3", "count": 8},
                "ib": {"hca_count": 8, "link_speed": "NDR"},
            }
        },
        "pxe_network": {"cidr": "10.0.0.0/24", "gateway": "10.0.0.1", "dhcp_range": ["10.0.0.10", "10.0.0.200"]},
        "racks": [
            {
                "name": "r1",
                "hosts": [
                    {"hostname": f"gpu-{i}", "u": i * 4, "role": "gpu", "class": "hgx",
                     "bmc": {"address": f"10.1.0.{i}", "credential": "bmc"}}
                    for i in range(1, 4)
                ],
            },
            {
                "name": "r2",
                "hosts": [
                    {"hostname": f"gpu-2{i}", "u": i * 4, "role": "gpu", "class": "hgx",
                     "bmc": {"address": f"bmc-2{i}.example.net", "port": 8443, "credential": "bmc"}}
                    for i in range(1, 7)
                ],
            },
        ],
    }


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "site.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False) if not isinstance(data, str) else data)
    return path


def _problems(tmp_path: Path, data: Any) -> list[str]:
    with pytest.raises(SiteError) as info:
        load_site(_write(tmp_path, data))
    return info.value.problems


def test_shipped_sites_load() -> None:
    sim = load_site(REPO / "inventory" / "sim")
    assert sim.name == "sim"
    assert len([h for h in sim.hosts() if h.role == "gpu"]) == 16
    assert len(sim.spec.racks) == 2
    imbue = load_site(REPO / "inventory" / "examples" / "imbue-scale.yml")
    assert len(imbue.hosts()) == 511
    hc = imbue.host_class(imbue.hosts()[0])
    assert hc.gpu is not None and hc.gpu.count == 8 and hc.ib is not None and hc.ib.hca_count == 8


def test_good_site_loads_and_hosts_know_their_rack(tmp_path: Path) -> None:
    site = load_site(_write(tmp_path, _good()))
    assert [h.rack for h in site.hosts()] == ["r1"] * 3 + ["r2"] * 6
    assert site.default_state_path() == tmp_path.resolve() / "state" / "lab.db"


def _mutate(path: str, value: Any) -> dict[str, Any]:
    data = _good()
    target: Any = data
    keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
    for key in keys[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return data


_DELETE = object()

BAD_INPUTS = [
    ("racks.1.hosts.5.bmc.address", "10.0.0.300", "line {}: racks[1].hosts[5].bmc.address: not an IP address or hostname"),
    ("racks.0.hosts.0.bmc.address", "bad_host!", "racks[0].hosts[0].bmc.address: not an IP address or hostname"),
    ("racks.0.hosts.1.hostname", _DELETE, "racks[0].hosts[1].hostname: required field is missing"),
    ("racks.0.hosts.1.role", "compute", "racks[0].hosts[1].role: Input should be 'gpu', 'controller' or 'storage'"),
    ("racks.0.hosts.2.u", 0, "racks[0].hosts[2].u: Input should be greater than or equal to 1"),
    ("racks.0.hosts.2.bmc.port", 70000, "racks[0].hosts[2].bmc.port: Input should be less than or equal to 65535"),
    ("racks.0.hosts.0.colour", "red", "racks[0].hosts[0].colour: unknown field (check its spelling)"),
    ("host_classes.hgx.ib.link_speed", "NDR800", "host_classes.hgx.ib.link_speed: Input should be"),
    ("host_classes.hgx.gpu.count", "eight", "host_classes.hgx.gpu.count: Input should be a valid integer"),
    ("credentials.bmc.password", {"env": "X", "vault": "v.yml", "key": "k"}, "credentials.bmc.password: give exactly one"),
    ("credentials.bmc.password", {"value": "hunter2"}, "credentials.bmc.password.value: unknown field"),
    ("credentials.bmc.password", {"env": "1BAD"}, "credentials.bmc.password.env: not an environment variable name"),
    ("pxe_network.gateway", "10.9.9.1", "pxe_network: gateway 10.9.9.1 is outside 10.0.0.0/24"),
    ("pxe_network.dhcp_range", ["10.0.0.200", "10.0.0.10"], "pxe_network: dhcp_range starts after it ends"),
    ("racks", [], "racks: List should have at least 1 item"),
    ("name", "my site", "name: not a valid host name"),
]


@pytest.mark.parametrize(("where", "value", "expected"), BAD_INPUTS, ids=[b[0] + "=" + repr(b[1])[:20] for b in BAD_INPUTS])
def test_each_bad_field_gets_one_error_naming_its_path(tmp_path: Path, where: str, value: Any, expected: str) -> None:
    problems = _problems(tmp_path, _mutate(where, value))
    assert len(problems) == 1, problems
    if "{}" in expected:
        line_prefix, rest = expected.split("{}: ", 1)
        assert problems[0].startswith(line_prefix) and problems[0].endswith(rest), problems
    else:
        assert expected in problems[0], problems


def test_the_error_carries_the_yaml_line(tmp_path: Path) -> None:
    text = yaml.safe_dump(_mutate("racks.1.hosts.5.bmc.address", "10.0.0.300"), sort_keys=False)
    problems = _problems(tmp_path, text)
    line = int(problems[0].split(":")[0].removeprefix("line "))
    assert "10.0.0.300" in text.splitlines()[line - 1] or "bmc" in text.splitlines()[line - 1]


def test_cross_entry_problems_are_all_reported(tmp_path: Path) -> None:
    data = _good()
    hosts = data["racks"][0]["hosts"]
    hosts[1]["hostname"] = hosts[0]["hostname"]          # duplicate name
    hosts[2]["bmc"]["address"] = hosts[0]["bmc"]["address"]  # shared BMC
    hosts[2]["u"] = hosts[0]["u"]                          # same U
    hosts[1]["class"] = "dgx-b200"                         # unknown class
    hosts[1]["bmc"]["credential"] = "ipmi"                 # unknown credential
    data["racks"][1]["hosts"][0]["u"] = 47
    data["racks"][1]["height_u"] = 42                      # above the rack top
    problems = _problems(tmp_path, data)
    text = "\n".join(problems)
    assert "racks[0].hosts[0].hostname: host name 'gpu-1' is declared more than once" in text
    assert "racks[0].hosts[1].hostname: host name 'gpu-1' is declared more than once" in text
    assert "racks[0].hosts[2].bmc.address: BMC 10.1.0.1:443 is shared with another host" in text
    assert "racks[0].hosts[2].u: U4 is already taken by gpu-1" in text
    assert "racks[0].hosts[1].class: unknown host class 'dgx-b200' (known: hgx)" in text
    assert "racks[0].hosts[1].bmc.credential: unknown credential 'ipmi' (known: bmc)" in text
    assert "racks[1].hosts[0].u: U47 is above the top of a 42U rack" in text
    assert all(p.startswith("line ") for p in problems)


def test_missing_referenced_files_are_named(tmp_path: Path) -> None:
    data = _good()
    data["fabric"] = {"design": "fabric/design.yml"}
    data["credentials"]["bmc"]["password"] = {"vault": "secrets.yml", "key": "bmc_password"}
    data["maas"] = {"url": "https://maas.example:5240/MAAS/", "api_key": {"env": "MAAS_KEY"}, "ca_bundle": "maas-ca.pem"}
    problems = _problems(tmp_path, data)
    assert any("fabric.design: cabling design file not found: fabric/design.yml" in p for p in problems)
    assert any("maas.ca_bundle: CA bundle not found: maas-ca.pem" in p for p in problems)
    assert any("credentials.bmc.password.vault: vault file not found: secrets.yml" in p for p in problems)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: [unclosed", "not valid YAML"),
        ("- just\n- a list\n", "expected a mapping at the top level"),
        ("", "expected a mapping at the top level"),
        ("name: x\n\tracks: []\n", "not valid YAML"),
    ],
)
def test_unparseable_files_get_one_clear_error(tmp_path: Path, text: str, expected: str) -> None:
    problems = _problems(tmp_path, text)
    assert len(problems) == 1 and expected in problems[0]


def test_missing_file_and_binary_file(tmp_path: Path) -> None:
    with pytest.raises(SiteError, match="file not found"):
        load_site(tmp_path / "nope.yml")
    bad = tmp_path / "site.yml"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SiteError, match="cannot read"):
        load_site(bad)


def test_secret_values_are_never_in_the_model(tmp_path: Path) -> None:
    site = load_site(_write(tmp_path, copy.deepcopy(_good())))
    dumped = site.spec.model_dump_json()
    assert "LAB_BMC_PASSWORD" in dumped  # the reference, never a value


def test_ntp_servers_are_optional_one_name_each(tmp_path: Path) -> None:
    assert load_site(_write(tmp_path, _good())).spec.ntp.servers == []  # the common role then uses pool.ntp.org
    data = _good()
    data["ntp"] = {"servers": ["10.0.0.2", "ntp1.mgmt.example.net"]}
    assert load_site(_write(tmp_path, data)).spec.ntp.servers == ["10.0.0.2", "ntp1.mgmt.example.net"]
    data["ntp"] = {"servers": ["10.0.0.2 iburst"]}
    problems = _problems(tmp_path, data)
    assert len(problems) == 1 and "ntp.servers" in problems[0] and "without spaces" in problems[0], problems
    data["ntp"] = {"servers": ["10.0.0.2", "10.0.0.2"]}
    assert "more than once" in _problems(tmp_path, data)[0]



# Bounded input (issue 16): a hostile site file is one clear error, in milliseconds, with nothing cached.


def _laughs(levels: int) -> str:
    """A 'billion laughs' document: each level an anchor of 10 aliases of the one before (10**levels)."""
    lines = ['lol0: &lol0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"lol{i}: &lol{i} [{', '.join([f'*lol{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_a_billion_laughs_site_file_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    started = time.monotonic()
    problems = _problems(tmp_path, "name: lab\nracks: []\n" + _laughs(9))
    assert time.monotonic() - started < 2.0
    assert len(problems) == 1 and "expands to more than 1000000 YAML nodes" in problems[0]
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "site.yml"]  # no cache of it


def test_an_alias_that_contains_itself_is_refused(tmp_path: Path) -> None:
    problems = _problems(tmp_path, yaml.safe_dump(_good(), sort_keys=False) + "loop: &loop [*loop]\n")
    assert len(problems) == 1 and "an alias refers to a node that contains it" in problems[0]


def test_a_site_file_nested_deeper_than_any_site_is_refused(tmp_path: Path) -> None:
    problems = _problems(tmp_path, yaml.safe_dump(_good(), sort_keys=False) + "deep: " + "[" * 200 + "]" * 200 + "\n")
    assert len(problems) == 1 and "nested more than 64 levels deep" in problems[0]


def test_anchors_and_merge_keys_within_the_bound_still_load(tmp_path: Path) -> None:
    data = yaml.safe_dump(_good(), sort_keys=False)
    text = data.replace("credential: bmc\n", "credential: &cred bmc\n", 1).replace(
        "credential: bmc\n", "credential: *cred\n")
    assert "*cred" in text
    assert len(load_site(_write(tmp_path, text)).hosts()) == len(load_site(_write(tmp_path, _good())).hosts())


@pytest.mark.parametrize(("device", "kind"), [("/dev/zero", "a character device"), ("/dev/null", "a character device"),
                                              ("/", "a directory")], ids=["zero", "null", "directory"])
def test_a_site_path_that_is_not_a_regular_file_is_refused_without_reading(device: str, kind: str,
                                                                             tmp_path: Path) -> None:
    if device == "/":
        device = str(tmp_path / "site.yml")
        Path(device).mkdir()
        (Path(device) / "site.yml").mkdir()  # a directory is read as its site.yml: make that a directory too
    with pytest.raises(SiteError, match=f"is {kind}: only a regular file is read"):
        load_site(device)


def test_a_site_file_that_is_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "site.yml"
    os.mkfifo(fifo)
    with pytest.raises(SiteError, match="a pipe"):
        load_site(fifo)


def test_a_site_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "site.yml"
    with big.open("wb") as out:
        out.write(b"name: lab\n")
        out.truncate(16 * 1024 * 1024 + 1)  # sparse
    with pytest.raises(SiteError, match="larger than the 16 MiB limit"):
        load_site(big)
