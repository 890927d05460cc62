"""What the report shows, as frozen data: gathered once (gather*.py), rendered to HTML (render.py) and to
JSON (`provision report --json`, `dataclasses.asdict`), so both always say the same thing."""

from __future__ import annotations

from dataclasses import dataclass

# Colours by status, shared by every figure and the legend (severity order: worst first).
STATUS_ORDER = ("disabled", "fail", "critical", "finding", "unknown", "warn", "not_covered", "pass", "ok",
                "not_applicable", "untested")
STATUS_RANK = {status: i for i, status in enumerate(STATUS_ORDER)}


@dataclass(frozen=True)
class StageCount:
    state: str
    hosts: int  # hosts of the rack that reached this state (failed hosts: the state they failed in)


@dataclass(frozen=True)
class RackFunnel:
    rack: str
    hosts: int
    stages: tuple[StageCount, ...]
    failed: int
    golden: int


@dataclass(frozen=True)
class HistoryItem:
    at: str
    command: str
    from_state: str | None
    to_state: str
    reason: str | None
    override: bool


@dataclass(frozen=True)
class FailedHost:
    host: str
    rack: str
    reason: str
    failed_while: str | None
    since: str
    detail: str  # one line: what happened
    evidence: str  # the stored evidence as indented JSON, bounded
    remediation: str
    history: tuple[HistoryItem, ...]


@dataclass(frozen=True)
class HealthCell:
    check: str
    status: str  # ok | warn | critical | unknown | not_applicable | untested
    summary: str


@dataclass(frozen=True)
class HealthRow:
    host: str
    rack: str
    level: str
    verdict: str
    cells: tuple[HealthCell, ...]  # one per HealthMatrix.checks, in that order
    failed: bool  # the host is failed now (its row links to its entry)


@dataclass(frozen=True)
class HealthMatrix:
    checks: tuple[str, ...]
    rows: tuple[HealthRow, ...]
    not_checked: tuple[str, ...]  # hosts with no health result


@dataclass(frozen=True)
class Switch:
    name: str
    tier: int
    model: str
    location: str
    links: int


@dataclass(frozen=True)
class MapLink:
    """One line of the fabric map: a switch-to-switch cable, or every cable between one rack's hosts and one
    leaf (`b` is then `rack <name>`), coloured by the worst of its cables."""

    a: str
    b: str
    tier: int
    cables: int
    status: str
    detail: str


@dataclass(frozen=True)
class FindingRow:
    kind: str
    a: str
    b: str
    expected: str
    seen: str
    fix: str


@dataclass(frozen=True)
class DisabledLink:
    link: str
    ends: str  # both ends with their locations
    ports: tuple[str, ...]  # both ends as NAME[PORT]
    state: str
    via: str
    why: str
    ticket: str
    at: str


@dataclass(frozen=True)
class FabricMap:
    design: str  # the design's name ("" when the site has no fabric design)
    tiers: tuple[str, ...]  # tier names, tier 1 first
    switches: tuple[Switch, ...]
    racks: tuple[str, ...]  # host racks, as the bottom row of the map
    links: tuple[MapLink, ...]
    validation: str  # where the findings come from, or why there are none
    findings: tuple[FindingRow, ...]
    disabled: tuple[DisabledLink, ...]


@dataclass(frozen=True)
class BurninLink:
    link: str
    name: str
    kind: str
    verdict: str
    gbps: float | None
    errors: int
    reason: str
    remediation: str


@dataclass(frozen=True)
class Burnin:
    run: int | None  # None: no burn-in run in the store
    floor_gbps: float
    counts: tuple[tuple[str, int], ...]
    links: tuple[BurninLink, ...]  # worst first


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Ethernet:
    ran: bool
    source: str  # the file read, or why there is none
    facts: tuple[tuple[str, str], ...]  # the JSON's top-level values
    tables: tuple[Table, ...]  # the JSON's lists of objects


@dataclass(frozen=True)
class Point:
    step: int
    value: float


@dataclass(frozen=True)
class Restart:
    """One restart the job's supervisor recorded (RUN/supervisor.jsonl, training/supervisor.py)."""

    attempt: int
    cause: str  # failed / hung / degraded, with the diagnosis' kind
    failed: tuple[tuple[str, str], ...]  # host, exit code
    dropped: tuple[tuple[str, str], ...]  # host, its verdict (or `suspect`)
    added: tuple[str, ...]
    checkpoint: str
    resume_step: int | None


@dataclass(frozen=True)
class Training:
    ran: bool
    source: str
    steps: int
    loss: tuple[Point, ...]
    mfu: tuple[Point, ...]  # a ratio (0.42 = 42%)
    events: tuple[tuple[str, str], ...]  # (event, what it said), in order
    restarts: tuple[Restart, ...] = ()
    supervisor: str = ""  # where the restarts came from, or why there are none


@dataclass(frozen=True)
class Slurm:
    ran: bool  # a `provision slurm sync` recorded something in this store
    nodes: Table | None
    standings: tuple[tuple[str, int], ...]  # standing, hosts
    events: int  # `slurm sync` events in the hosts' histories
    job: tuple[tuple[str, str], ...]  # the training job under Slurm (slurm-job.json), key and value
    job_source: str


@dataclass(frozen=True)
class ComponentVersions:
    """One kind of firmware component across the inventoried fleet, beside what the baseline wants."""

    kind: str  # bios, bmc, nic, hca, gpu, ...
    baseline: str  # the version (or `>= minimum`) the baseline pins; "" where it pins none
    versions: tuple[tuple[str, int], ...]  # version, hosts running it
    off: tuple[str, ...]  # hosts off the baseline for this kind now


@dataclass(frozen=True)
class BiosSetting:
    attribute: str
    wanted: str
    values: tuple[tuple[str, int], ...]  # value, hosts holding it
    off: tuple[str, ...]


@dataclass(frozen=True)
class FirmwareEvent:
    """A baseline step's move of one host: a drift that failed it, or a fix that put it back into the flow."""

    at: str
    host: str
    command: str
    from_state: str
    to_state: str
    reason: str
    detail: str


@dataclass(frozen=True)
class Firmware:
    ran: bool  # some firmware inventory is recorded in the store
    inventoried: int
    on_baseline: int
    components: tuple[ComponentVersions, ...]
    bios: tuple[BiosSetting, ...]
    events: tuple[FirmwareEvent, ...]


@dataclass(frozen=True)
class Report:
    site: str
    generated: str
    state_db: str
    run_dir: str
    hosts: int
    funnel: tuple[RackFunnel, ...]
    failed: tuple[FailedHost, ...]
    fabric: FabricMap
    ethernet: Ethernet
    health: HealthMatrix
    burnin: Burnin
    training: Training
    slurm: Slurm
    firmware: Firmware
