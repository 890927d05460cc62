"""The health agent live on this machine, through the controller's SSH fan-out.

    python3 bench/health_live.py --out DIR [--site inventory/h200-live/site.yml] [--levels fast,long]

Serves this machine over SSH on 127.0.0.1 (an asyncssh server that runs each command with /bin/sh in
the repository, as sshd would for a host where the health_agent role installed `tools/`), then runs
what an operator runs: `provision mark HOST configured`, `provision health --level L --json` for each
level, `provision golden`, `provision status --json`. Every command's output goes to DIR; the figures
and verdicts are printed. Nothing is asserted: the verdicts are the agent's on whatever machine this is.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import asyncssh

ROOT = Path(__file__).resolve().parents[1]


async def _run(process: asyncssh.SSHServerProcess[bytes]) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
    proc = await asyncio.create_subprocess_exec("/bin/sh", "-c", process.command or "true", cwd=ROOT, env=env,
                                                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    await process.redirect(stdin=proc.stdin, stdout=proc.stdout, stderr=proc.stderr)
    rc = await proc.wait()
    await process.stdout.drain()
    await process.stderr.drain()
    process.exit(rc)


class Server:
    """One SSH endpoint on loopback, in a thread with its own event loop; stopped by `close`."""

    def __init__(self, port: int, host_key: asyncssh.SSHKey, client_key: asyncssh.SSHKey) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._main, args=(port, host_key, client_key), daemon=True)
        self.thread.start()
        if not self.ready.wait(10):
            raise RuntimeError("SSH server did not start")

    def _main(self, port: int, host_key: asyncssh.SSHKey, client_key: asyncssh.SSHKey) -> None:
        asyncio.set_event_loop(self.loop)
        authorized = asyncssh.import_authorized_keys(client_key.export_public_key().decode())
        self.acceptor = self.loop.run_until_complete(asyncssh.listen(
            "127.0.0.1", port, server_host_keys=[host_key], authorized_client_keys=authorized,
            process_factory=_run, encoding=None))
        self.ready.set()
        self.loop.run_forever()

    def close(self) -> None:
        async def stop() -> None:
            self.acceptor.close()
            await self.acceptor.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


RESULTS: dict[str, dict[str, Any]] = {}


def provision(site: Path, name: str, *args: str) -> tuple[int, str, float]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}",
           "BRINGUP_LIVE_BMC_PASSWORD": os.environ.get("BRINGUP_LIVE_BMC_PASSWORD", "unused")}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "provision", *args, "--site", str(site)], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    RESULTS[name] = {"command": "provision " + " ".join(args), "rc": done.returncode, "seconds": round(seconds, 2),
                     "stdout": done.stdout, "stderr": done.stderr[-4000:]}
    return done.returncode, done.stdout, seconds


def long_figures(events: list[dict[str, Any]]) -> list[str]:
    """The measured figures of the long checks in the last recorded health event, one line each."""
    lines = []
    for event in reversed(events):
        checks = (event.get("evidence") or {}).get("report", {}).get("checks", [])
        for c in checks:
            if c.get("check") in ("gpu_stress", "gpu_memory_bandwidth", "nccl_allreduce"):
                lines.append(f"  {c['check']}: {c.get('status')} {c.get('summary', '')} {c.get('metrics')}")
        if lines:
            break
    return lines


def summarise(report: dict[str, Any]) -> str:
    lines = []
    for host in report.get("hosts", []):
        lines.append(f"  {host.get('host')}: {host.get('verdict')} ({host.get('reason') or 'no failing check'})")
        for p in host.get("problems", [])[:12]:
            lines.append(f"    {p.get('check')}: {p.get('status')} {p.get('reason')}")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--site", type=Path, default=ROOT / "inventory/h200-live/site.yml")
    p.add_argument("--levels", default="fast,long")
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    site = a.site.resolve()
    state = site.parent / "state"
    state.mkdir(exist_ok=True)
    for stale in state.glob("*"):
        if stale.is_file():
            stale.unlink()
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key.write_private_key(str(state / "live_client_key"))
    import yaml

    spec = yaml.safe_load(site.read_text())
    host = spec["racks"][0]["hosts"][0]["hostname"]
    server = Server(int(spec["ssh"]["port"]), asyncssh.generate_private_key("ssh-ed25519"), client_key)
    try:
        rc, _, _ = provision(site, "mark", "mark", host, "configured", "--reason",
                             "configured by hand on the lent machine")
        print(f"mark {host} configured: rc {rc}", flush=True)
        for level in a.levels.split(","):
            rc, out, seconds = provision(site, f"health-{level}", "health", "--level", level, "--json")
            print(f"health --level {level}: rc {rc}, {seconds:.1f} s", flush=True)
            try:
                print(summarise(json.loads(out)), flush=True)
            except json.JSONDecodeError:
                print(RESULTS[f"health-{level}"]["stderr"][-2000:])
        for name, args in (("golden", ("golden", "--format", "torchrun")), ("status", ("status", "--json")),
                           ("history", ("history", host, "--json"))):
            rc, out, _ = provision(site, name, *args)
            print(f"{name}: rc {rc}", flush=True)
        try:
            print("\n".join(long_figures(json.loads(RESULTS["history"]["stdout"]))))
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            print(f"history unreadable: {exc}")
    finally:
        server.close()
        (a.out / "live.json").write_text(json.dumps(RESULTS, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
