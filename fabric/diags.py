"""How this site's infiniband-diags tools reach its fabric: a prefix, an environment and attachment points.

By default the tools are on PATH and reach the fabric through this host's HCAs (`fabric.live` picks the local
HCAs with an ACTIVE InfiniBand port as attachment points, `-C <hca> -P <port>`). A site whose tools need more
(a wrapper that runs them on a management host or in a container, variables they read, attachment points that
are not this host's HCAs) announces it in a JSON file: `$BRINGUP_IB_DIAGS`, else the one beside the site file
(`SitePaths.ib_diags`). Whatever provides the tools writes it, e.g.

    {"prefix": ["/opt/fabric/run-diags"],        put before every tool's argv
     "env": {"NAME": "value"},                    added to every tool's environment
     "pid": 1234,                                 optional: the process serving the tools (gone: not running)
     "attach": [{"label": "plane-a", "guid": "0x...", "args": ["-C", "mlx5_0", "-P", "1"], "env": {}}]}

It names programs bringup runs, so it is trusted as the site file is (kept beside it, written by whoever
may change the site). Every tool runs through `fabric.toolrun` (deadline, process-group kill, output cap,
scratch directory), capped at what each tool may print (`fabric.toolrun.max_output_of`): its built-in cap, or
the site file's own where it sets one (`fabric.diags.max_output_mib`, read with the site by `Diags.for_site`).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabric.errors import DiscoveryError, FabricError
from fabric.toolrun import max_output_of, run_tool, run_tool_async
from provision.errors import BringupError
from provision.site.bounded import read_text
from provision.state.peer_json import loads

if TYPE_CHECKING:
    from provision.site import Site

DIAGS_ENV = "BRINGUP_IB_DIAGS"
MAX_ANNOUNCEMENT = 4 * 1024 * 1024


@dataclass(frozen=True)
class Attachment:
    """A point the tools can reach the fabric from: `args` go after the tool's name, `env` into its environment."""

    label: str
    guid: str | None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    def command(self, tool: str, *rest: str) -> list[str]:
        return [tool, *self.args, *rest]


@dataclass(frozen=True)
class Diags:
    """The tools of one fabric. `attachments` None: this host's HCAs (found by `fabric.live` when needed)."""

    prefix: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    attachments: tuple[Attachment, ...] | None = None
    source: Path | None = None  # the announcement read, if any
    max_output: Mapping[str, int] = field(default_factory=dict)  # tool name -> the site's cap in bytes, if it sets one

    @classmethod
    def for_site(cls, site_file: Path | None, explicit: Path | None = None, site: Site | None = None) -> Diags:
        """`explicit` > `$BRINGUP_IB_DIAGS` > the announcement beside `site_file` > this host's tools; with the
        output caps `site_file` sets (`fabric.diags.max_output_mib`), whichever of them runs the tools. `site`:
        that file already loaded by the caller (else it is loaded here, validated)."""
        chosen = explicit or (Path(os.environ[DIAGS_ENV]) if os.environ.get(DIAGS_ENV) else None)
        if site_file is None:
            return cls.from_file(chosen) if chosen is not None else cls()
        if site is None:
            from provision.site import load_site

            site = load_site(site_file)
        chosen = chosen or announced_for_site(site_file)
        tools = cls.from_file(chosen) if chosen is not None else cls()
        caps = site.spec.fabric.diags.max_output_bytes() if site.spec.fabric is not None else {}
        return dataclasses.replace(tools, max_output=caps)

    @classmethod
    def from_file(cls, path: Path) -> Diags:
        try:
            doc = loads(read_text(path, limit=MAX_ANNOUNCEMENT, what="fabric tools' announcement"))
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            prefix = tuple(_strings(doc.get("prefix", []), "prefix"))
            env = _env(doc.get("env", {}))
            points = tuple(_attachment(p) for p in _list(doc.get("attach", []), "attach"))
            pid = int(doc["pid"]) if doc.get("pid") is not None else None
        except (OSError, ValueError, KeyError, TypeError, BringupError) as e:
            raise DiscoveryError(f"the fabric tools' announcement {path} is unreadable: {e}") from None
        if pid is not None:
            _alive(pid, path)
        return cls(prefix, env, points, path)

    def argv(self, argv: Sequence[str], attach: Attachment | None = None) -> list[str]:
        tool, *rest = argv
        return [*self.prefix, *(attach.command(tool, *rest) if attach is not None else [tool, *rest])]

    def environ(self, attach: Attachment | None = None) -> dict[str, str]:
        return {**self.env, **(attach.env if attach is not None else {})}

    def run_sync(self, argv: Sequence[str], timeout_s: float,
                 attach: Attachment | None = None) -> subprocess.CompletedProcess[str]:
        """The tool run from `attach` (default: wherever the tools attach by themselves); `fabric.toolrun`'s
        errors as they are."""
        return run_tool(self.argv(argv, attach), self.environ(attach), timeout_s, self.cap(argv[0]), argv[0])

    async def run(self, argv: Sequence[str], timeout_s: float,
                  attach: Attachment | None = None) -> subprocess.CompletedProcess[str]:
        return await run_tool_async(self.argv(argv, attach), self.environ(attach), timeout_s, self.cap(argv[0]),
                                    argv[0])

    def cap(self, tool: str) -> int:
        """What `tool` may print, in bytes: the site's cap for it, else the built-in one."""
        return max_output_of(tool, self.max_output)

    async def text(self, argv: Sequence[str], timeout_s: float, attach: Attachment | None = None) -> str:
        """The tool's stdout; FabricError when it is missing, fails, prints too much or outlives `timeout_s`."""
        what = " ".join(argv)
        try:
            proc = await self.run(argv, timeout_s, attach)
        except FileNotFoundError:
            raise FabricError(f"{self.argv(argv)[0]} not found: install infiniband-diags") from None
        except OSError as e:
            raise FabricError(f"{what} could not be run: {e.strerror or e}") from None
        except subprocess.TimeoutExpired:
            raise FabricError(f"{what} did not answer within {timeout_s:g} s") from None
        if proc.returncode != 0:
            raise FabricError(f"{what} failed (rc {proc.returncode}): {last_complaint(proc)}")
        return proc.stdout


def announced_for_site(site: Path) -> Path | None:
    """The announcement beside this site's file (`SitePaths.ib_diags`), if one is there."""
    from provision.site.index import load_index

    path = load_index(site).paths.ib_diags
    return path if path.is_file() else None


def last_complaint(proc: subprocess.CompletedProcess[str]) -> str:
    """A failed tool's last stderr line (else stdout's), for the one-line error naming it."""
    lines = (proc.stderr or proc.stdout or "").strip().splitlines()
    return lines[-1] if lines else "no output"


def _alive(pid: int, path: Path) -> None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise DiscoveryError(f"the fabric tools announced in {path} are not running (pid {pid} is gone)") from None
    except PermissionError:
        pass


def _list(value: object, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list")
    return value


def _strings(value: object, what: str) -> list[str]:
    items = _list(value, what)
    if not all(isinstance(v, str) for v in items):
        raise ValueError(f"{what} holds something other than strings")
    return items


def _env(value: object) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError("env is not a mapping of strings to strings")
    return dict(value)


def _attachment(point: object) -> Attachment:
    if not isinstance(point, dict) or not isinstance(point.get("label"), str):
        raise ValueError("an attachment point is not an object with a label")
    guid = point.get("guid")
    return Attachment(label=point["label"], guid=str(guid) if guid is not None else None,
                      args=tuple(_strings(point.get("args", []), "args")), env=_env(point.get("env", {})))
