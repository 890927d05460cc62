"""DMTF's Redfish Service Validator (`redfish_service_validator` on PyPI, deps/python/redfish.txt) against a
simulated iDRAC: every resource it can reach from the service root is checked against DMTF's CSDL
schemas, and it must find no failure.

The validator runs as its own command would be run by hand, with a session login, except that it reads
the schemas from tests/fixtures/redfish_dsp8010/ (`--skipschema`) instead of downloading DSP8010 from
dmtf.org. The only warnings allowed are deprecations the simulator keeps because a real iDRAC9 sends
them too (R650, iDRAC9 5.10, ../shared/realdata/2_redfish/dell_idrac9_r650/); each names its capture.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from provision.site import load_site
from tests.redfish.simlab import SimProcess, free_port, new_password, write_site

SCHEMAS = Path(__file__).resolve().parents[1] / "fixtures" / "redfish_dsp8010" / "csdl"
IDRAC = Path(__file__).resolve().parents[2] / ".." / "shared" / "realdata" / "2_redfish" / "dell_idrac9_r650"
SYSTEM_FILE = "redfish_v1_Systems_System.Embedded.1.json"
ADAPTER_FILE = "redfish_v1_Chassis_System.Embedded.1_NetworkAdapters_NIC.Integrated.1.json"
FUNCTION_FILE = ("redfish_v1_Chassis_System.Embedded.1_NetworkAdapters_NIC.Integrated.1_NetworkDeviceFunctions_"
                 "NIC.Integrated.1-1-1.json")
PORT_FILE = "redfish_v1_Chassis_System.Embedded.1_NetworkAdapters_NIC.Integrated.1_NetworkPorts_NIC.Integrated.1-1.json"
# (property, warning kind) → (the real capture that has the same, the property's path in it)
ALLOWED_WARNINGS = {
    ("/IndicatorLED", "Deprecated Property Warning"): (SYSTEM_FILE, "IndicatorLED"),
    ("/MemorySummary/Status", "Deprecated Property Warning"): (SYSTEM_FILE, "MemorySummary/Status"),
    ("/ProcessorSummary/Status", "Deprecated Property Warning"): (SYSTEM_FILE, "ProcessorSummary/Status"),
    ("/NetworkPorts", "Deprecated Property Warning"): (ADAPTER_FILE, "NetworkPorts"),
    ("/Links/PhysicalPortAssignment", "Deprecated Property Warning"): (FUNCTION_FILE, "Links/PhysicalPortAssignment"),
    # NetworkPort under NetworkAdapters/{Id}/NetworkPorts: DSP8010 moved ports to Ports (Port schema).
    ("/@odata.id", "Deprecated URI Warning"): (PORT_FILE, "@odata.id"),
}
# `rf_service_validator` as its console script runs it, less the Excel copy of its report: openpyxl styles
# each of its cells one by one, 90% of the run (57 of 64 s profiled on 2 loaded cores). The validation,
# its HTML report and its debug log (which this test reads) are the tool's own.
RUN_WITHOUT_XLSX = ("import sys; from redfish_service_validator import console_scripts, report; "
                    "report.xlsx_report = lambda *args, **kwargs: 'not written'; sys.exit(console_scripts.main())")
_RESULT = re.compile(r"^(FAIL|WARN) - (?:(/\S*) \((.*?)\): )?([^:]+): (.*)$")
_LOG_LINE = re.compile(r"^\S+ \S+ - \S+ - (INFO|WARNING|ERROR|CRITICAL) - (.*)$")


@dataclass(frozen=True)
class Finding:
    uri: str
    level: str  # FAIL, WARN or CRITICAL (the validator could not do something)
    prop: str  # "" for a finding about the whole resource
    kind: str  # "Deprecated Property Warning", "Resource Error", ...
    text: str


@dataclass(frozen=True)
class ValidatorRun:
    returncode: int
    counts: dict[str, int]  # PASS, WARN, FAIL, NOT TESTED from the summary table
    validated: tuple[str, ...]
    findings: tuple[Finding, ...]
    skipped_download: bool


def parse_debug_log(text: str) -> tuple[tuple[str, ...], tuple[Finding, ...], bool]:
    """The URIs validated, in order, and each FAIL/WARN/CRITICAL line under the URI it belongs to."""
    validated: list[str] = []
    findings: list[Finding] = []
    skipped = False
    for line in text.splitlines():
        m = _LOG_LINE.match(line)
        if m is None:
            continue
        level, body = m.groups()
        if level == "INFO":
            if body.startswith("Validating ") and body.endswith("..."):
                validated.append(body[len("Validating "):-3])
            skipped = skipped or body.startswith("Skipping schema download")
            continue
        uri = validated[-1] if validated else ""
        r = _RESULT.match(body)
        if level == "CRITICAL" or r is None:
            findings.append(Finding(uri, "CRITICAL", "", "", body))
        else:
            findings.append(Finding(uri, r.group(1), r.group(2) or "", r.group(4), r.group(5)))
    return tuple(validated), tuple(findings), skipped


def parse_summary(stdout: str) -> dict[str, int]:
    lines = [ln for ln in re.sub(r"\x1b\[[0-9;]*m", "", stdout).splitlines() if ln.startswith("|")]
    names = [c.strip() for c in lines[0].strip("|").split("|")]
    values = [int(c.strip()) for c in lines[1].strip("|").split("|")]
    return dict(zip(names, values, strict=True))


@pytest.fixture(scope="module")
def validator_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ValidatorRun]:
    pytest.importorskip("redfish_service_validator", reason="not installed (pip install -r deps/python/redfish.txt)")
    d = tmp_path_factory.mktemp("rsv")
    password = new_password()
    site = write_site(d, 1, free_port())
    host = load_site(site).hosts()[0]
    with SimProcess(site, password, d / "run") as sim:
        config = d / "validator.ini"  # the password goes in a 0600 file, never on a command line
        config.touch(mode=0o600)
        config.write_text("[Authentication]\nuser = root\n"
                          f"password = {password}\nauthtype = Session\n"
                          f"[Connection]\nrhost = https://{host.bmc.address}:{host.bmc.port}\ntimeout = 10\n")
        done = subprocess.run(
            [sys.executable, "-c", RUN_WITHOUT_XLSX, "--config", str(config), "--skipschema",
             "--schema_directory", str(SCHEMAS), "--logdir", str(d / "logs")],
            cwd=d, capture_output=True, text=True, timeout=120, check=False)
        sessions_left = sim.hosts()[host.hostname]["sessions"]
    logs = list((d / "logs").glob("*/RedfishServiceValidatorDebug_*.log"))
    assert len(logs) == 1, done.stdout[-2000:] + done.stderr[-2000:]
    validated, findings, skipped = parse_debug_log(logs[0].read_text())
    assert sessions_left == 0, "the validator's session was not deleted at logout"
    yield ValidatorRun(done.returncode, parse_summary(done.stdout), validated, findings, skipped)


def _shown(findings: list[Finding]) -> str:
    return "\n".join(f"{f.level} {f.uri} {f.prop} {f.kind}: {f.text}" for f in findings)


def test_dmtf_service_validator_finds_no_failure_on_a_simulated_idrac(validator_run: ValidatorRun) -> None:
    run = validator_run
    assert run.skipped_download  # the schemas came from the fixture, nothing from dmtf.org
    bad = [f for f in run.findings if f.level != "WARN"]
    assert not bad, _shown(bad)
    assert run.counts["FAIL"] == 0 and run.returncode == 0
    unexpected = [f for f in run.findings if (f.prop, f.kind) not in ALLOWED_WARNINGS]
    assert not unexpected, _shown(unexpected)
    deprecated_uris = [f.uri for f in run.findings if f.kind == "Deprecated URI Warning"]
    assert all("/NetworkAdapters/" in u and "/NetworkPorts" in u for u in deprecated_uris), deprecated_uris
    assert run.counts["PASS"] > 500


def test_dmtf_service_validator_walked_the_whole_simulated_tree(validator_run: ValidatorRun) -> None:
    walked = set(validator_run.validated)
    for uri in ("/redfish/v1", "/redfish/v1/AccountService", "/redfish/v1/AccountService/Accounts/2",
                "/redfish/v1/AccountService/Roles/ReadOnly", "/redfish/v1/SessionService/Sessions",
                "/redfish/v1/Systems/System.Embedded.1/EthernetInterfaces/NIC.Integrated.1-1-1",
                "/redfish/v1/Chassis/System.Embedded.1/NetworkAdapters/InfiniBand.Slot.32/NetworkDeviceFunctions/"
                "InfiniBand.Slot.32-1",
                "/redfish/v1/Managers/iDRAC.Embedded.1", "/redfish/v1/Systems/System.Embedded.1/Bios"):
        assert uri in walked or uri + "/" in walked, uri
    # its own session, listed in the Sessions collection, was read too
    assert any(re.fullmatch(r"/redfish/v1/SessionService/Sessions/\d+", u) for u in walked)


@pytest.mark.realdata
@pytest.mark.skipif(not IDRAC.is_dir(), reason="real iDRAC captures (../shared/realdata) not present")
def test_each_allowed_warning_is_what_a_real_idrac_sends() -> None:
    for (prop, kind), (capture, path) in ALLOWED_WARNINGS.items():
        value = json.loads((IDRAC / capture).read_text())
        for part in path.split("/"):
            assert isinstance(value, dict) and part in value, f"{capture} has no {path}: {prop} {kind} is ours alone"
            value = value[part]
