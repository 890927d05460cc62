"""Running the suite on several pytest-xdist workers (`./bringup test` does, `-n <cores + 1> --dist loadgroup`).

The simulated lab binds the fixed loopback addresses of `sim/addresses.py` (and the site files under
`inventory/` name them), so two workers starting it at once would collide. Each worker therefore enters a
network namespace of its own before it runs a test: its own loopback with all of 127.0.0.0/8, so every lab,
peer and client it starts (they inherit the namespace) sees only its own worker's servers. What a network
namespace does not separate is made private too: ssh's ControlMaster sockets (`ansible.cfg` asks for
ControlPersist; the socket is a file named for host, port and user, which two workers' test hosts share).

Fixtures broader than a test (module, package, session scope) are built once per worker that uses them:
`group_by_shared_fixtures` puts every test that shares such a fixture instance in one `xdist_group`, and
`GroupScheduling` runs each group on one worker, so the demo run (a minute) or the Debian test hosts are never
built twice and tests that follow each other on one lab keep their order. xdist's own `loadgroup` cannot do it
under pytest 9 (it renames `item._nodeid`, which pytest 9 no longer reads): the workers write the groups they
collected to a folder the controller made (`$BRINGUP_XDIST_GROUPS`), and the scheduler reads them there.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import shutil
import socket
import struct
import tempfile
from pathlib import Path
from typing import Any

import pytest

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
SIOCSIFADDR = 0x8916
# A second loopback address: glibc's getaddrinfo(AI_ADDRCONFIG) counts no IPv4 address but 127.0.0.1 as none
# configured and then resolves no IPv4 name at all; Slurm's daemons and commands ask with that flag
# (sim/slurm/lab.py), so a namespace with only 127.0.0.1 would leave them unable to reach each other.
LOOPBACK_ALIAS = ("lo:bringup", "127.0.2.250")
IFF_UP = 0x1
IFREQ = "16sH22x"  # struct ifreq: the name, then ifr_flags (the rest of the union unused)
CONTROL_PATH_ENV = "ANSIBLE_SSH_CONTROL_PATH_DIR"
GROUPS_ENV = "BRINGUP_XDIST_GROUPS"
GROUPED_DISTS = ("load", "loadgroup")  # --dist modes whose scheduling GroupScheduling replaces
TESTS = Path(__file__).resolve().parent


class WorkerIsolationError(RuntimeError):
    """A worker could not get a network of its own: running it beside others would collide."""


def worker_id(config: pytest.Config) -> str | None:
    """`gw0`, `gw1`, ... on an xdist worker; None in a plain run or on the controller (also one started by a
    test running on a worker, which inherits PYTEST_XDIST_WORKER: the environment cannot tell)."""
    workerinput = getattr(config, "workerinput", None)
    return None if workerinput is None else str(workerinput["workerid"])


def _bring_loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        got = fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0))
        flags = struct.unpack(IFREQ, got)[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))
        name, address = LOOPBACK_ALIAS
        sockaddr = struct.pack("HH4s8x", socket.AF_INET, 0, socket.inet_aton(address))
        fcntl.ioctl(sock, SIOCSIFADDR, struct.pack("16s16s8x", name.encode(), sockaddr))


def network_namespace() -> str:
    """The network namespace of the calling thread (`net:[inode]`)."""
    return os.readlink("/proc/thread-self/ns/net")


def enter_private_network() -> None:
    """Move this thread (the worker's main thread, which runs every test and starts every thread and process
    a test makes) into a new network namespace with its loopback up. Needs CAP_SYS_ADMIN (root, as
    `./bringup test` and CI run); refused, the worker stops rather than share the lab's addresses."""
    before = network_namespace()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise WorkerIsolationError(
            f"unshare(CLONE_NEWNET): {os.strerror(err)}: xdist workers need a network namespace each "
            "(run as root, or run pytest without -n)")
    _bring_loopback_up()
    if network_namespace() == before:
        raise WorkerIsolationError("unshare(CLONE_NEWNET) left the worker in the shared network namespace")


class Isolation:
    """What one xdist worker made its own: the network namespace it runs tests in, the ssh control folder."""

    def __init__(self, worker: str) -> None:
        enter_private_network()
        self.namespace = network_namespace()
        self.control = Path(tempfile.mkdtemp(prefix=f"bringup-{worker}-ssh-cp-"))
        os.environ[CONTROL_PATH_ENV] = str(self.control)

    def check(self, test: str) -> None:
        """A test run by a thread outside the worker's namespace would reach the other workers' lab."""
        if network_namespace() != self.namespace:
            raise WorkerIsolationError(f"{test} runs outside its worker's network namespace")

    def close(self) -> None:
        shutil.rmtree(self.control, ignore_errors=True)


def prepare_outside_namespaces(config: pytest.Config) -> None:
    """On the controller of a run with workers: build what needs the internet before the workers enter their
    namespaces, which have none. That is the test hosts' Debian base (one debootstrap, cached; a worker that
    built it itself would find no mirror). Without root or debootstrap the tests say so themselves."""
    if worker_id(config) is not None or not getattr(config.option, "numprocesses", None):
        return
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        return
    from sim.testhosts.base import ensure_base

    ensure_base()


def isolate_worker(config: pytest.Config) -> Isolation | None:
    """On an xdist worker: its Isolation; nothing in a plain run."""
    worker = worker_id(config)
    return None if worker is None else Isolation(worker)


def _fixture_instances(item: pytest.Item) -> list[str]:
    """A key for each instance of a broader-than-function project fixture the test uses: the same key for two
    tests means they would share one instance (when run by one process)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    keys = []
    module = item.nodeid.split("::", 1)[0]
    for name, defs in info.name2fixturedefs.items():
        fixturedef = defs[-1]
        func_file = getattr(fixturedef.func, "__code__", None)
        if fixturedef.scope == "function" or func_file is None:
            continue
        if not Path(func_file.co_filename).resolve().is_relative_to(TESTS):
            continue  # pytest's own (tmp_path_factory, ...): cheap, and nothing to share
        where = {"module": module, "class": item.nodeid.rsplit("::", 1)[0]}.get(fixturedef.scope, fixturedef.baseid)
        keys.append(f"{where}::{name}")
    return keys


def group_by_shared_fixtures(items: list[pytest.Item]) -> None:
    """Mark every test with the xdist group of the broad fixtures it shares with others (transitively: a test
    using the demo run and a module's fixture joins the two), so `--dist loadgroup` runs each group on one
    worker and builds each fixture once."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    per_item = [(item, _fixture_instances(item)) for item in items]
    for _item, keys in per_item:
        for key in keys[1:]:
            parent[find(key)] = find(keys[0])
    for item, keys in per_item:
        if keys:
            item.add_marker(pytest.mark.xdist_group(find(keys[0])))


def open_groups_folder(config: pytest.Config) -> Path | None:
    """On the controller of a grouped xdist run: the folder the workers write their groups to (inherited by
    them through the environment). None elsewhere."""
    if worker_id(config) is not None or getattr(config.option, "dist", "no") not in GROUPED_DISTS:
        return None
    folder = Path(tempfile.mkdtemp(prefix="bringup-xdist-groups-"))
    os.environ[GROUPS_ENV] = str(folder)
    return folder


def share_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker: every grouped test's node id and group, for the controller's scheduler."""
    folder, worker = os.environ.get(GROUPS_ENV), worker_id(config)
    if not folder or worker is None:
        return
    groups = {}
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        if mark is not None:
            groups[item.nodeid] = str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    written = Path(folder, f".{worker}.json.part")
    written.write_text(json.dumps(groups), encoding="utf-8")
    written.replace(Path(folder, f"{worker}.json"))  # whole, before the worker reports its collection


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scope scheduling with a group as the scope of each grouped test (every other test its own
    scope); the largest groups are handed out first, single tests balance the end."""
    from xdist.scheduler import LoadScopeScheduling

    folder = Path(os.environ[GROUPS_ENV])

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # first asked once every worker has collected, so every file is there
                self.groups = {}
                for written in sorted(folder.glob("gw*.json")):
                    self.groups.update(json.loads(written.read_text(encoding="utf-8")))
            return self.groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)
