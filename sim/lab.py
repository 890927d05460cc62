"""The simulated lab's process manager: start, health-wait, stop and account for every simulator.

Each simulator is a `Service`: a command line run as a child process in its own session (so the
whole process group can be signalled), a health probe, and the environment it needs. `Lab.up()`
starts them in order, writes a pid file per service under the lab's run directory and waits until
each is healthy; `Lab.down()` sends SIGTERM to each group, waits, then SIGKILLs what is left, and
removes the pid files. Nothing the lab starts outlives `down()`, and `Lab` is a context manager so a
test or the demo can never leave a server behind. Nor outlives the process that called `up()`, however it dies
(SIGKILL included): `up()` binds every service to it (sim/lifetime.py), unless it is `sim up`'s
`up(detached=True)`, whose services run until `sim down` (or until whatever bound `sim up` itself dies).

Simulators plug in without editing this file: any package `sim/<name>/` with a module `service.py`
that defines `services(ctx: LabContext) -> list[Service]` is picked up by `discover_services` (unless the
module sets `LAB_DEFAULT = False`: its services are started by their own harness only). A slow
or privileged simulator offers an opt-in service instead, in `optional_service.py` with
`services(ctx, arg: str | None) -> list[Service]`: it starts only when named (`sim up --with NAME[=ARG]`),
and `sim down` stops it like any other (every pid file in the run directory is stopped).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import pkgutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from provision.errors import BringupError
from provision.site import Site
from sim import lifetime
from sim.addresses import check_loopback

Probe = Callable[[], bool]


class LabError(BringupError):
    """The simulated lab could not be started, probed or stopped."""


@dataclass(frozen=True)
class LabContext:
    """What a simulator needs to know to describe its service: the site and where to keep files."""

    site: Site
    run_dir: Path
    secrets: dict[str, str]


@dataclass(frozen=True)
class Service:
    name: str
    argv: list[str]
    probe: Probe
    env: dict[str, str] = field(default_factory=dict)
    start_timeout_s: float = 60.0
    stop_timeout_s: float = 10.0
    cwd: Path | None = None
    exports: dict[str, str] = field(default_factory=dict)  # variables the lab exports for clients
    # Started before the others and waited for last (it needs none of them to start: the slow test hosts),
    # so its start overlaps theirs.
    early: bool = False


def tcp_probe(host: str, port: int, timeout_s: float = 0.5) -> Probe:
    check_loopback(host)

    def probe() -> bool:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return True
        except OSError:
            return False

    return probe


# The lab's own package directory: `sim.__path__` is not it when a `sim/` directory in the working directory
# shadows the package (then the lab found no simulators and said "lab is up (0 services)").
SIM_DIR = Path(__file__).resolve().parent


def _check_package() -> None:
    """Refuse to run when `import sim` is not this package (a shadowing `sim/` came first on sys.path)."""
    module = sys.modules.get("sim")
    where = getattr(module, "__file__", None) or ", ".join(getattr(module, "__path__", []) or ["?"])
    if module is None or where is None or Path(where).resolve().parent != SIM_DIR:
        raise LabError(f"`import sim` finds {where}, not the lab's package {SIM_DIR}: a sim/ directory where this "
                       "runs shadows it; run from another directory (or with python -P)")


def discover_services(ctx: LabContext) -> list[Service]:
    """Every simulator package's services for this site, in package-name order."""
    _check_package()
    found: list[Service] = []
    for info in sorted(pkgutil.iter_modules([str(SIM_DIR)]), key=lambda m: m.name):
        if not info.ispkg:
            continue
        try:
            module = importlib.import_module(f"sim.{info.name}.service")
        except ModuleNotFoundError as exc:
            if exc.name == f"sim.{info.name}.service":
                continue
            raise
        factory = getattr(module, "services", None)
        if callable(factory) and getattr(module, "LAB_DEFAULT", True):
            found.extend(factory(ctx))
    return found


def optional_service_names() -> list[str]:
    """Packages under sim/ that offer an opt-in service (`optional_service.py`)."""
    _check_package()
    return sorted(info.name for info in pkgutil.iter_modules([str(SIM_DIR)])
                  if info.ispkg and importlib.util.find_spec(f"sim.{info.name}.optional_service") is not None)


def parse_with(values: list[str]) -> dict[str, str | None]:
    """`--with NAME[=ARG]` options as {name: arg}; an unknown name is an error that lists the known ones."""
    known = optional_service_names()
    wanted: dict[str, str | None] = {}
    for value in values:
        for item in filter(None, (part.strip() for part in value.split(","))):
            name, sep, arg = item.partition("=")
            if name not in known:
                raise LabError(f"--with {name}: no such optional service (known: {', '.join(known) or 'none'})")
            wanted[name] = arg if sep else None
    return wanted


def optional_services(ctx: LabContext, wanted: dict[str, str | None]) -> list[Service]:
    """The services of the opt-in simulators named in `wanted` ({name: arg or None})."""
    found: list[Service] = []
    for name, arg in wanted.items():
        module = importlib.import_module(f"sim.{name}.optional_service")
        found.extend(module.services(ctx, arg))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); reap it if it is ours.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


class Lab:
    """The set of running simulators for one site, tracked through pid files in `run_dir`."""

    def __init__(self, services: list[Service], run_dir: Path) -> None:
        self.services = services
        self.run_dir = run_dir
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._started: dict[str, float] = {}

    def _pidfile(self, name: str) -> Path:
        return self.run_dir / f"{name}.pid"

    def _logfile(self, name: str) -> Path:
        return self.run_dir / f"{name}.log"

    def running(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for pidfile in sorted(self.run_dir.glob("*.pid")):
            try:
                pid = int(pidfile.read_text().strip())
            except (OSError, ValueError):
                continue
            if _alive(pid):
                out[pidfile.stem] = pid
        return out

    def up(self, *, detached: bool = False) -> None:
        """Start what is not running and healthy. `detached`: the services outlive this process (`sim up`)."""
        if not self.services:
            raise LabError(f"no simulators found for this site under {SIM_DIR}: nothing to start")
        if not detached:
            lifetime.bind_children()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        already = self.running()
        early = [svc for svc in self.services if svc.early]
        try:
            for svc in early + [svc for svc in self.services if not svc.early]:
                if svc.name in already:
                    if svc.probe():
                        continue
                    self._stop_one(svc.name, already[svc.name], svc.stop_timeout_s)
                self._start(svc, wait=not svc.early)
            for svc in early:
                self._wait(svc)
        except BaseException:
            self.down()
            raise
        self._write_exports()

    def _start(self, svc: Service, *, wait: bool = True) -> None:
        log = self._logfile(svc.name).open("ab")
        # The simulators import this lab's package whatever directory they start in: the project root first
        # on their path, and no working directory prepended (a sim/ there would shadow it).
        path = os.pathsep.join(p for p in (str(SIM_DIR.parent), os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, **svc.env, "PYTHONUNBUFFERED": "1", "PYTHONSAFEPATH": "1", "PYTHONPATH": path}
        try:
            proc = subprocess.Popen(
                svc.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=svc.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            raise LabError(f"{svc.name}: cannot start {svc.argv[0]}: {exc}") from None
        finally:
            log.close()
        self._procs[svc.name] = proc
        self._pidfile(svc.name).write_text(f"{proc.pid}\n")
        self._started[svc.name] = time.monotonic()
        if wait:
            self._wait(svc)

    def _wait(self, svc: Service) -> None:
        proc = self._procs.get(svc.name)
        if proc is None:  # already running and healthy
            return
        deadline = self._started[svc.name] + svc.start_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = self._tail(svc.name)
                raise LabError(f"{svc.name} exited with code {proc.returncode} while starting: {tail}")
            if svc.probe():
                return
            time.sleep(0.05)
        raise LabError(f"{svc.name} did not become healthy within {svc.start_timeout_s:.0f} s: {self._tail(svc.name)}")

    def _tail(self, name: str, lines: int = 5) -> str:
        try:
            text = self._logfile(name).read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:]) or "(empty log)"

    def _stop_one(self, name: str, pid: int, timeout_s: float) -> None:
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        proc = self._procs.pop(name, None)
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                break
            if proc is None and not _alive(pid):
                break
            time.sleep(0.05)
        _signal_group(pid, signal.SIGKILL)  # anything left in the group, children included
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        with contextlib.suppress(FileNotFoundError):
            self._pidfile(name).unlink()

    def down(self) -> list[str]:
        stopped = []
        timeouts = {svc.name: svc.stop_timeout_s for svc in self.services}
        for name, pid in reversed(list(self.running().items())):
            self._stop_one(name, pid, timeouts.get(name, 10.0))
            stopped.append(name)
        for pidfile in self.run_dir.glob("*.pid"):
            pidfile.unlink(missing_ok=True)
        with contextlib.suppress(FileNotFoundError):
            (self.run_dir / "env.json").unlink()
        return stopped

    def status(self) -> dict[str, dict[str, object]]:
        running = self.running()
        return {
            svc.name: {"pid": running.get(svc.name), "healthy": svc.name in running and svc.probe()}
            for svc in self.services
        }

    def exports(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for svc in self.services:
            out.update(svc.exports)
        return out

    def _write_exports(self) -> None:
        path = self.run_dir / "env.json"
        path.write_text(json.dumps(self.exports(), indent=2))
        path.chmod(0o600)

    @contextlib.contextmanager
    def running_lab(self) -> Iterator[Lab]:
        self.up()
        try:
            yield self
        finally:
            self.down()


def lab_port(url: object, address: str, default_port: int) -> int | None:
    """The port of `url` when it names the lab's `address` (the site points at the simulator), else None:
    a site whose endpoint is elsewhere gets no simulator."""
    parts = urlsplit(str(url))
    if parts.hostname != address:
        return None
    return parts.port or default_port


def python_module(module: str, *args: str) -> list[str]:
    """argv for running one of the project's modules with this interpreter."""
    return [sys.executable, "-m", module, *args]
