"""Run a cabling design in `ibsim` and discover it with the real `ibnetdiscover`/`iblinkinfo`.

`IbFabric` writes the ibsim net file from the design's as-built cabling (`sim.asbuilt`, where faults
such as swapped or missing cables are applied before start), starts `ibsim` as a child process in its
own session, on abstract unix sockets named for this instance only (`IBSIM_SOCKNAME`: nothing listens
on any network interface), with its console on a fifo, and runs discovery tools through `ibsim-run`
with a timeout (the lab's prefix `run-diags`, sim/ibfabric/diags_prefix.py). Faults at run time go
through that console (`Unlink "S-..."[p]`, `ReLink`, `Guid`, `PerformanceSet`).
The child dies with the process that started it, however that one dies (sim/lifetime.py;
PR_SET_PDEATHSIG would fire when the starting *thread* ends, not the process), and `stop()` (also
on leaving the `with` block) quits, terminates, then kills it and removes the work directory: nothing outlives it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from fabric.design import Design
from fabric.topology import NodeType
from provision.errors import BringupError
from sim import lifetime
from sim.asbuilt import AsBuilt
from sim.ibfabric.diags_prefix import RUN_DIAGS, run_sim_tool, sim_env

_counter = itertools.count()


class IbsimError(BringupError):
    """ibsim could not be started, probed or driven, or a tool run against it failed."""


class IbFabric:
    def __init__(
        self,
        design: Design,
        faults: Callable[[AsBuilt], None] | None = None,
        *,
        switch_descriptions: str = "factory",
        workdir: Path | None = None,
        state_file: Path | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.design = design
        self.asbuilt = AsBuilt.from_design(design, switch_descriptions)
        if faults is not None:
            faults(self.asbuilt)
        self.timeout_s = timeout_s
        self.socket = f"bringup-ibsim-{os.getpid()}-{next(_counter)}-{os.urandom(3).hex()}"
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="ibfabric-"))
        self.state_file = state_file
        self.netfile = self.workdir / "fabric.net"
        self.fifo = self.workdir / "console"
        self.log = self.workdir / "ibsim.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._console_fd: int | None = None

    # lifecycle --------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._proc is not None:
            return
        ibsim = shutil.which("ibsim")
        if ibsim is None or shutil.which("ibsim-run") is None:
            raise IbsimError("ibsim is not installed (Debian packages ibsim-utils and infiniband-diags)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        lifetime.bind_children()
        self.netfile.write_text(self.asbuilt.render(ibsim=True))
        if not self.fifo.exists():
            os.mkfifo(self.fifo, 0o600)
        # Holding the write end open keeps ibsim's console from reading EOF (where it would spin).
        self._console_fd = os.open(self.fifo, os.O_RDWR)
        switches = sum(1 for n in self.asbuilt.nodes.values() if n.type is NodeType.SWITCH)
        ports = sum(n.ports + 1 for n in self.asbuilt.nodes.values())
        argv = [ibsim, "-s", "-N", str(len(self.asbuilt.nodes) + 64), "-S", str(switches + 16),
                "-P", str(ports + 1024), str(self.netfile)]
        with open(self.fifo, "rb") as stdin, open(self.log, "wb") as out:
            self._proc = subprocess.Popen(
                argv, stdin=stdin, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir,
                env={**os.environ, "IBSIM_SOCKNAME": self.socket}, start_new_session=True,
            )
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                tail = self.log.read_text(errors="replace").strip().splitlines()[-3:]
                self.stop()
                raise IbsimError(f"ibsim exited with {self._proc.returncode if self._proc else '?'}: "
                                 + " / ".join(tail))
            if "Network simulator ready." in self.log.read_text(errors="replace") and self.healthy():
                self._write_state()
                return
            time.sleep(0.05)
        self.stop()
        raise IbsimError(f"ibsim did not become healthy within {self.timeout_s:g} s")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                if self._console_fd is not None:
                    os.write(self._console_fd, b"Quit\n")
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=5)
        if self._console_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._console_fd)
            self._console_fd = None
        if self.state_file is not None:
            with contextlib.suppress(FileNotFoundError):
                self.state_file.unlink()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> IbFabric:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def healthy(self) -> bool:
        if self._proc is None or self._proc.poll() is not None:
            return False
        try:
            proc = self._run(["ibaddr"], None, timeout_s=5)
        except IbsimError:
            return False
        return proc.returncode == 0

    # tools ------------------------------------------------------------------------------------------
    def env(self, sim_host: str | None = None) -> dict[str, str]:
        """What a client needs to talk to this simulator (besides running it under the lab's prefix)."""
        return sim_env(self.socket, sim_host)

    def _run(self, argv: list[str], sim_host: str | None,
             timeout_s: float | None = None) -> subprocess.CompletedProcess[str]:
        try:
            return run_sim_tool(argv, self.env(sim_host), timeout_s or self.timeout_s)
        except subprocess.TimeoutExpired:
            raise IbsimError(f"{argv[0]} on the simulated fabric did not finish within "
                             f"{timeout_s or self.timeout_s:g} s") from None

    def tool(self, argv: list[str], attach: str | None = None) -> str:
        """Output of an infiniband-diags tool run from design node `attach` (default: the first node).

        Its stderr lines (libibnetdisc's 'Duplicate Port ...', timeouts) follow stdout, as with `2>&1`
        (the simulator's own notices are dropped by the prefix, `run-diags`)."""
        if self._proc is None:
            raise IbsimError("the simulated fabric is not running")
        proc = self._run(argv, self.asbuilt.sim_id(attach) if attach else None)
        err = proc.stderr.splitlines()
        if proc.returncode != 0:
            raise IbsimError(f"{' '.join(argv)} failed (rc {proc.returncode}): {(err or ['no output'])[-1]}")
        return proc.stdout + ("\n" + "\n".join(err) + "\n" if err else "")

    def discover(self, attach: str | None = None) -> str:
        """`ibnetdiscover` text, as seen from design node `attach` (default: the first node)."""
        return self.tool(["ibnetdiscover"], attach)

    def iblinkinfo(self, attach: str | None = None, line_mode: bool = False) -> str:
        return self.tool(["iblinkinfo", "-l"] if line_mode else ["iblinkinfo"], attach)

    def attach_names(self) -> list[str]:
        return [n.name for n in self.asbuilt.nodes.values() if n.type is NodeType.CA]

    # console faults ---------------------------------------------------------------------------------
    def console(self, command: str, timeout_s: float = 5.0) -> str:
        """Send one command to ibsim's console; return what it printed before the next prompt."""
        if self._console_fd is None or self._proc is None:
            raise IbsimError("the simulated fabric is not running")
        before = self.log.read_text(errors="replace")
        os.write(self._console_fd, command.encode() + b"\n")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            now = self.log.read_text(errors="replace")
            if now.count("sim> ") > before.count("sim> "):
                return now[len(before):].rsplit("sim> ", 1)[0]
            time.sleep(0.02)
        raise IbsimError(f"ibsim did not answer {command!r} within {timeout_s:g} s")

    def unlink(self, node: str, port: int) -> None:
        self._checked(f'Unlink "{self.asbuilt.sim_id(node)}"[{port}]')

    def relink(self, node: str, port: int) -> None:
        self._checked(f'ReLink "{self.asbuilt.sim_id(node)}"[{port}]')

    def set_guid(self, node: str, guid: int) -> None:
        self._checked(f'Guid "{self.asbuilt.sim_id(node)}" 0x{guid:016x}')

    def perf_set(self, node: str, port: int, field: str, value: int) -> None:
        self._checked(f'PerformanceSet "{self.asbuilt.sim_id(node)}"[{port}] PortCounters.{field}={value}')

    def _checked(self, command: str) -> None:
        out = self.console(command)
        if "not found" in out or "bad" in out.lower() or "can't" in out:
            raise IbsimError(f"ibsim refused {command!r}: {out.strip()}")

    # the announcement of the fabric's tools (fabric/diags.py), with the lab's own fields -------------
    def _write_state(self) -> None:
        if self.state_file is None:
            return
        state = {
            "prefix": [str(RUN_DIAGS)],
            "env": sim_env(self.socket),
            "pid": self.pid,
            "socket": self.socket,
            "netfile": str(self.netfile),
            "console": str(self.fifo),
            "attach": [{"label": f"sim:{self.asbuilt.sim_id(n)}", "guid": self.asbuilt.guid_of(n),
                        "env": {"SIM_HOST": self.asbuilt.sim_id(n)}, "id": self.asbuilt.sim_id(n), "name": n}
                       for n in self.attach_names()],
        }
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_file)
