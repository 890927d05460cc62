"""One run of the README's main command (`python -m sim demo`) for the whole test session, watched.

Running the demo takes a few minutes (site.yml configures the test hosts); the tests that judge its outcome (tests/sim/test_demo.py) and the
ones that look for credentials in everything it produced (tests/hostile/test_secrets_everywhere.py) share
this one run. Its credentials are chosen to be easy to find, and every process's command line is sampled
while it runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tests.sites import copy_sim_site

REPO = Path(__file__).resolve().parents[1]
BMC_PASSWORD = "FindMeBmcPassw0rd-7f3a9c"
MAAS_KEY = "FindMeConsumer4b1e:FindMeTokenKey9d2c:FindMeTokenSecret0c8e51aa77"


class CmdlineSampler(threading.Thread):
    """Every distinct `/proc/*/cmdline` seen until stopped: /proc is listed every 20 ms, and a process's command
    line read on each listing for its first half second (a fork that execs shows its new argv there) and once a
    second after that. Reading every process's on every listing cost a quarter of a core during the demo."""

    YOUNG_S = 0.5
    EVERY_S = 1.0

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: set[bytes] = set()
        self.samples = 0
        self.stop = threading.Event()

    def run(self) -> None:
        born: dict[str, float] = {}  # pid -> when first listed (a pid missing from a listing is a new process next)
        last_full = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            full = now - last_full >= self.EVERY_S
            listed: dict[str, float] = {}
            for entry in os.scandir("/proc"):
                if entry.name.isdigit():
                    first = listed[entry.name] = born.get(entry.name, now)
                    if full or now - first < self.YOUNG_S:
                        try:
                            self.seen.add(Path(entry.path, "cmdline").read_bytes())
                        except OSError:
                            continue
            born = listed
            last_full = now if full else last_full
            self.samples += 1
            self.stop.wait(0.02)


@dataclass(frozen=True)
class DemoRun:
    root: Path  # everything the run wrote is under here
    site: Path
    returncode: int
    stdout_bytes: bytes
    stderr_bytes: bytes
    cmdlines: frozenset[bytes]
    samples: int
    took_s: float

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode(errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode(errors="replace")


def run_demo(root: Path) -> DemoRun:
    site = copy_sim_site(root / "sim")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
    # The test hosts' own files (their overlays' upper layers) stay after the run, for the credentials search.
    env.update(BRINGUP_SIM_BMC_PASSWORD=BMC_PASSWORD, BRINGUP_SIM_MAAS_API_KEY=MAAS_KEY, COLUMNS="80",
               BRINGUP_SIM_KEEP_HOST_FILES="1")
    sampler = CmdlineSampler()
    sampler.start()
    started = time.monotonic()
    try:
        out = subprocess.run([sys.executable, "-m", "sim", "demo", "--site", str(site)], cwd=REPO, env=env,
                             capture_output=True, timeout=1500, check=False)
    finally:
        sampler.stop.set()
        sampler.join()
    # kept beside the run, for its stage timings (the demo's closing table) after the session
    (root / "demo.out").write_bytes(out.stdout)
    return DemoRun(root, site, out.returncode, out.stdout, out.stderr, frozenset(sampler.seen), sampler.samples,
                   time.monotonic() - started)
