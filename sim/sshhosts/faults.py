"""The faults file: which captures each simulated host replays, and what goes wrong on which host.

    fixture_root: ../../tests/fixtures/tools/replay   # directory of replay sets, relative to this file
    default_fixture: h200x2-healthy                   # every host replays this set unless it says otherwise
    hosts:
      gpu-r1-03: {fixture: h200x2-xid79}              # a faulty capture set
      gpu-r1-04: {tools: {nvidia-smi-q: truncate}}    # one tool's output cut short (also: empty, garble,
                                                      #   missing, hang)
      gpu-r1-05: {endpoint: refuse}                   # nothing listens (also: hang_handshake, drop,
                                                      #   wrong_host_key, hang: the command never ends)
      gpu-r1-06: {delay_s: 4}                         # a slow host: the command starts 4 s late
      gpu-r1-07: {agent_output: garbled}              # the agent's report mangled in transit (truncated, empty;
                                                      #   flood: endless output on stdout, never exits)
      gpu-r2-01: {job: fail}                          # simulated jobs fail when this host takes part (or hang)
      gpu-r2-04: {perftest: garbage}                  # its ib_write_bw misbehaves (exit_early, garbage, hang,
                                                      #   drop: the SSH session drops mid-run)
      gpu-r2-06: {os: [held_wrong_version]}           # done to a test host's OS before bring-up (the
                                                      #   embedded site's test hosts: sim/testhosts/faults.py)

Host names may be shell globs (`gpu-r2-*`); the first entry that matches a host wins.
"""

from __future__ import annotations

import fnmatch
from enum import StrEnum
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from provision.errors import BringupError


class FaultsError(BringupError):
    """The faults file is missing or invalid."""


class ToolFault(StrEnum):
    truncate = "truncate"
    empty = "empty"
    garble = "garble"
    missing = "missing"
    hang = "hang"


class EndpointFault(StrEnum):
    refuse = "refuse"
    hang_handshake = "hang_handshake"
    drop = "drop"
    wrong_host_key = "wrong_host_key"
    hang = "hang"


class OutputFault(StrEnum):
    garbled = "garbled"
    truncated = "truncated"
    empty = "empty"
    flood = "flood"


class PerftestFault(StrEnum):
    exit_early = "exit_early"  # ib_write_bw fails part-way (a completion error), as a flaky HCA does
    garbage = "garbage"  # prints a report whose result row is not numbers
    hang = "hang"  # never ends (until killed or the session closes)
    drop = "drop"  # the SSH session drops mid-run


class JobFault(StrEnum):
    fail = "fail"
    hang = "hang"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HostFaults(_Model):
    fixture: str | None = None
    endpoint: EndpointFault | None = None
    delay_s: float = Field(default=0.0, ge=0)
    agent_output: OutputFault | None = None
    tools: dict[str, ToolFault] = Field(default_factory=dict)
    job: JobFault | None = None
    perftest: PerftestFault | None = None
    os: tuple[str, ...] = ()


class FaultsSpec(_Model):
    fixture_root: str = "../../tests/fixtures/tools/replay"
    default_fixture: str
    hosts: dict[str, HostFaults] = Field(default_factory=dict)


class Faults:
    def __init__(self, spec: FaultsSpec, path: Path) -> None:
        self.spec = spec
        self.path = path

    @property
    def fixture_root(self) -> Path:
        return (self.path.parent / self.spec.fixture_root).resolve()

    def for_host(self, host: str) -> HostFaults:
        for pattern, faults in self.spec.hosts.items():
            if fnmatch.fnmatchcase(host, pattern):
                return faults
        return HostFaults()

    def fixture_dir(self, host: str) -> Path:
        name = self.for_host(host).fixture or self.spec.default_fixture
        return self.fixture_root / name


def load_faults(path: Path) -> Faults:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FaultsError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise FaultsError(f"{path}: not valid YAML ({exc})") from None
    try:
        spec = FaultsSpec.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise FaultsError(f"{path}: {problems}") from None
    faults = Faults(spec, path)
    names = {spec.default_fixture} | {f.fixture for f in spec.hosts.values() if f.fixture}
    missing = sorted(name for name in names if not (faults.fixture_root / name).is_dir())
    if missing:
        raise FaultsError(f"{path}: replay set(s) not found under {faults.fixture_root}: {', '.join(missing)}")
    return faults
