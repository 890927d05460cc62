"""Every process a lab starts dies with the process that started it, however that one dies (SIGKILL included).

`bind_children()`, called by a starter before it starts anything (Lab.up, SlurmLab.start, IbFabric.start, the
test hosts' `up`, the test session), starts one watchdog for the calling process: a small Python process in a
session of its own (a signal to the starter's process group or terminal does not reach it) that reads a pipe
whose only write end the starter holds. The starter dies, however, and the kernel closes that end: the watchdog
reads EOF and ends every process that carries the starter's token in its environment (`SIM_LAB_LIFETIME`, which
`bind_children` adds to the starter's own environment, so every child, grandchild and daemon it starts inherits
it) and every descendant of those (an sshd's sessions, a slurmd's job steps: programs that build their children's
environment afresh). SIGTERM first, so a supervisor can unmount and stop its daemons, then SIGKILL after
GRACE_S for whatever is left, rescanning until nothing is found. A daemon that forks into a new session or is
re-parented to init keeps the token, so neither process groups nor the process tree can lose it.

Not covered: a child made by fork() without exec() (it inherits the pipe's write end and keeps the watchdog
waiting until it exits too), and a program that drops its environment, or writes its process title over it
(sshd, which the test hosts therefore run below a shell), *and* leaves its parent.

A daemon that double-forks its workers into orphans that overwrite their environment (slurmd's slurmstepd, which
sets its process title there) runs under `reaping(argv)`: a child subreaper (prctl PR_SET_CHILD_SUBREAPER, kept
across exec), so the orphans stay its descendants.

PR_SET_PDEATHSIG is not used: it fires when the *thread* that forked the child ends (the test hosts' sshds are
started from a thread pool), not the process.

Mounts too: a process about to mount calls `will_mount(point)` first, which records the point, as intent, in the
record of the nearest starter above it (MOUNTS_DIR/<token>.mounts; the last token of its `SIM_LAB_LIFETIME`). The
watchdog, once the starter's processes are gone, unmounts every mount at or below a point of its own starter's
record that is still there (deepest first, lazily when busy) and removes the record: a point recorded but never
mounted (a crash between the two) is skipped, and a point another record claims (a later run in the same
directory, whose sweep unmounted the dead run's and mounted anew) is left to that run. A clean stop calls
`unmounted(points)`, which takes what it unmounted out of whichever record holds it. A process with no starter
above it (a detached lab) records nothing: its mounts last until its `down`, as its processes do.

`end_leftover` is the sweep at the next start, for what no watchdog could end (the watchdog itself killed): a
pid file's process, when it is alive and was started for the same run directory (its mounts: that run's `down`).

Imports only the standard library: the watchdog runs this file with `python -I -S`, fast and free of the project.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

ENV = "SIM_LAB_LIFETIME"  # the tokens of every starter above a process, ':'-separated
GRACE_S = 10.0  # between SIGTERM and SIGKILL: a supervisor's clean-up (16 test hosts' umounts) takes seconds
_ENV_READ_MAX = 1 << 20
_PR_SET_CHILD_SUBREAPER = 36
MOUNTS_DIR = Path("/run/bringup-sim-lifetime")  # <token>.mounts: the mount points a starter's lab made (root only)
_MNT_DETACH = 2

_lock = threading.Lock()
_bound: dict[int, tuple[str, int, subprocess.Popen[bytes]]] = {}  # this process's pid: (token, write end, watchdog)


def bind_children() -> str:
    """Tie every process this process starts from now on to its life; returns its token. Idempotent per process
    (a forked child that calls it gets a watchdog of its own)."""
    with _lock:
        mine = _bound.get(os.getpid())
        if mine is not None:
            return mine[0]
        token = secrets.token_hex(8)
        read_end, write_end = os.pipe()  # neither inheritable: no exec'd child holds the write end
        env = {k: v for k, v in os.environ.items() if k != ENV}  # no other watchdog ends this one
        try:
            watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", str(Path(__file__).resolve()), token, str(os.getpid())],
                stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                start_new_session=True)
        finally:
            os.close(read_end)
        tokens = [t for t in os.environ.get(ENV, "").split(":") if t]
        os.environ[ENV] = ":".join([*tokens, token])
        _bound[os.getpid()] = (token, write_end, watchdog)
        return token


def token() -> str | None:
    """This process's token, once `bind_children` ran in it."""
    mine = _bound.get(os.getpid())
    return mine[0] if mine is not None else None


def watchdog_pid() -> int | None:
    mine = _bound.get(os.getpid())
    return mine[2].pid if mine is not None else None


# /proc ---------------------------------------------------------------------------------------------------------

def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a live, non-zombie process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[1]), int(fields[19])


def start_time(pid: int) -> int | None:
    """The process's start time (ticks since boot): with the pid, names one process, never a later one."""
    stat = _stat(pid)
    return stat[1] if stat is not None else None


def _environ(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return handle.read(_ENV_READ_MAX)
    except OSError:
        return b""


def carries(pid: int, token: str) -> bool:
    prefix = ENV.encode() + b"="
    for entry in _environ(pid).split(b"\0"):
        if entry.startswith(prefix):
            return token.encode() in entry[len(prefix):].split(b":")
    return False


def _processes() -> dict[int, tuple[int, int]]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            found[int(entry)] = stat
    return found


def bound_to(token: str, exclude: frozenset[int] = frozenset()) -> dict[int, int]:
    """{pid: start time} of every live process that carries `token`, and of every descendant of one."""
    procs = _processes()
    return _below(procs, [pid for pid in procs if pid not in exclude and carries(pid, token)], exclude)


def descendants(pid: int) -> dict[int, int]:
    """{pid: start time} of every live descendant of `pid`."""
    procs = _processes()
    return _below(procs, [child for child, (ppid, _) in procs.items() if ppid == pid], frozenset({pid}))


def _below(procs: dict[int, tuple[int, int]], todo: list[int], exclude: frozenset[int]) -> dict[int, int]:
    """The processes of `todo` and all their descendants, as {pid: start time}."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, int] = {}
    while todo:
        pid = todo.pop()
        if pid in found or pid in exclude or pid not in procs:
            continue
        found[pid] = procs[pid][1]
        todo.extend(children.get(pid, []))
    return found


# the watchdog ----------------------------------------------------------------------------------------------------

def _deaf_to_sigterm(pid: int) -> bool:
    """Whether SIGTERM is blocked or ignored by the process (slurmstepd blocks it): it would wait out the grace."""
    bit = 1 << (signal.SIGTERM - 1)
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return False
    masks = {k: int(v, 16) for k, _, v in (ln.partition(":\t") for ln in lines) if k in ("SigBlk", "SigIgn")}
    return any(mask & bit for mask in masks.values())


def signal_all(victims: dict[int, int], sig: int) -> None:
    """Send `sig` to each {pid: start time} that is still that process."""
    for pid, started in victims.items():
        if start_time(pid) == started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


def end_bound(token: str, grace_s: float = GRACE_S) -> int:
    """SIGTERM every process bound to `token`, SIGKILL what is left after `grace_s` (at once, what blocks or
    ignores SIGTERM); returns how many."""
    me = frozenset({os.getpid()})
    victims = bound_to(token, me)
    # Judged before the SIGTERM: a supervisor ignores it once its handler runs, while it cleans up.
    deaf = {pid: t for pid, t in victims.items() if _deaf_to_sigterm(pid)}
    signal_all(victims, signal.SIGTERM)
    signal_all(deaf, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    # What the signalled ones start meanwhile is left alone until they are gone (a supervisor's `umount`s), then
    # ended with whatever else is bound.
    while time.monotonic() < deadline and any(start_time(pid) == t for pid, t in victims.items()):
        time.sleep(0.05)
    for _ in range(100):
        left = {pid: t for pid, t in victims.items() if start_time(pid) == t}
        left.update(bound_to(token, me))
        if not left:
            break
        victims.update(left)
        signal_all(left, signal.SIGKILL)
        time.sleep(0.02)
    return len(victims)


def _watch(argv: list[str]) -> int:
    bound_token = argv[0]
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        while os.read(0, 4096):  # EOF: every holder of the write end (the starter) is gone
            pass
    end_bound(bound_token)
    unmount_recorded(bound_token)
    return 0


def reaping(argv: list[str]) -> list[str]:
    """`argv` run as a child subreaper: what it double-forks stays below it instead of going to init."""
    return [sys.executable, "-I", "-S", str(Path(__file__).resolve()), "--reap", *argv]


def _reap_exec(argv: list[str]) -> int:
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 126
    os.execvp(argv[0], argv)


# mounts ----------------------------------------------------------------------------------------------------------

def _unescape(field: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are written as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


def mount_points() -> list[str]:
    """Every mount point of this mount namespace, once per mount (a point mounted over twice: twice)."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
        return [_unescape(line.split()[4]) for line in handle if line.strip()]


def _at_or_below(point: str, top: str) -> bool:
    return point == top or point.startswith(top.rstrip("/") + "/")


def mounted_below(path: Path | str) -> list[str]:
    """Mounts at or below `path`, deepest first, once per mount."""
    top = os.path.realpath(path)
    return sorted((p for p in mount_points() if _at_or_below(p, top)), key=lambda p: p.count("/"), reverse=True)


def _record(token: str) -> Path:
    return MOUNTS_DIR / f"{token}.mounts"


def _read_record(path: Path) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    points = []
    for line in lines:
        with contextlib.suppress(ValueError):  # a line torn by its writer's death names nothing mounted yet
            if isinstance(point := json.loads(line), str):
                points.append(point)
    return points


@contextlib.contextmanager
def _records_locked() -> Iterator[None]:
    """Records are written and read under one lock: a starter's intent is either seen by a watchdog deciding what
    is its own, or written after that watchdog is done."""
    MOUNTS_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(MOUNTS_DIR / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def will_mount(point: Path | str) -> None:
    """Record `point`, about to be mounted, in the record of the nearest starter above this process (its watchdog
    unmounts it should that starter die first). Without a starter above it: nothing."""
    tokens = [t for t in os.environ.get(ENV, "").split(":") if t]
    if not tokens:
        return
    with _records_locked(), open(_record(tokens[-1]), "a", encoding="utf-8") as record:
        record.write(json.dumps(os.path.realpath(point)) + "\n")


def unmounted(points: Iterable[str]) -> None:
    """Points a clean stop unmounted: out of every record that holds them (an emptied record is removed)."""
    gone = {os.path.realpath(p) for p in points}
    if not gone or not MOUNTS_DIR.is_dir():
        return
    with _records_locked():
        for path in MOUNTS_DIR.glob("*.mounts"):
            held = _read_record(path)
            kept = [p for p in held if p not in gone]
            if not kept:
                path.unlink(missing_ok=True)
            elif len(kept) != len(held):
                path.write_text("".join(json.dumps(p) + "\n" for p in kept), encoding="utf-8")


def _umount(point: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(os.fsencode(point), 0) != 0 and ctypes.get_errno() == errno.EBUSY:
        libc.umount2(os.fsencode(point), _MNT_DETACH)  # still in use: detached now, freed once no longer


def unmount_recorded(token: str) -> list[str]:
    """Unmount what `token`'s record names and is still mounted (with whatever is mounted below it), deepest
    first, except what another record claims; the record removed. Returns the points unmounted."""
    record = _record(token)
    if not record.exists():
        return []
    with _records_locked():
        mine = _read_record(record)
        theirs = [p for path in MOUNTS_DIR.glob("*.mounts") if path != record for p in _read_record(path)]
        points = [p for p in mount_points() if any(_at_or_below(p, m) for m in mine)
                  and not any(_at_or_below(t, p) for t in theirs)]
        points.sort(key=lambda p: p.count("/"), reverse=True)
        for point in points:
            _umount(point)
        record.unlink(missing_ok=True)
    return points


# the sweep at the next start -------------------------------------------------------------------------------------

def started_for(pid: int, marker: str) -> bool:
    """Whether `marker` (a run directory's path) is in the process's command line or environment."""
    needle = marker.encode()
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read(_ENV_READ_MAX)
    except OSError:
        return False
    return needle in cmdline or needle in _environ(pid)


def end_leftover(pidfile: Path, marker: str) -> int | None:
    """A previous run's process named by `pidfile`, alive and started for `marker`: SIGKILLed (with its process
    group when it leads one) and waited for; its pid. Anything else (no file, a dead or reused pid): None."""
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    started = start_time(pid)
    if pid <= 1 or pid == os.getpid() or started is None or not started_for(pid, marker):
        return None
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while start_time(pid) == started and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.02)
    return pid


if __name__ == "__main__":
    sys.exit(_reap_exec(sys.argv[2:]) if sys.argv[1:2] == ["--reap"] else _watch(sys.argv[1:]))
