"""The faults file's `agent_output:`, `delay_s` and `endpoint: hang` on a test host: they act on the health agent
the role installed, as the SSH-host simulator's sessions do (sim/sshhosts/server.py `_session`, `_mangle`, `_flood`;
`hang`: the command never ends, so the controller's timeout decides).

The controller starts the agent as `cd /opt/bringup && python3 -m tools.health` (provision/health/agent_command.py,
the role's unit). A `python3` in /usr/local/sbin (first in root's PATH) on a host with one of these faults
starts that invocation `delay_s` late and hands its report through the fault (`truncated`: the first half,
`empty`: nothing, `garbled`: mangled as in transit, `flood`: endless output, never exits); every other use of
`python3` (Ansible's modules use /usr/bin/python3 itself) runs the real one unchanged.
"""

from __future__ import annotations

from pathlib import Path

from sim.sshhosts.faults import EndpointFault, HostFaults, OutputFault

PROGRAM = "usr/local/sbin/python3"  # relative to the host's root
REAL = "/usr/bin/python3"

# Inline Python with no single quote (it sits in the shim's single-quoted words); the same changes as
# sim/sshhosts/server.py `_mangle`.
_MANGLE = ("import sys; t = sys.stdin.read(); f = sys.argv[1]; "
           "t = t[: len(t) // 2] if f == {q}truncated{q} else t; "
           "t = chr(27) + {q}[31m{q} + t[::-1].replace(chr(34), chr(0xFFFD)) + chr(0) if f == {q}garbled{q} else t; "
           "sys.stdout.write(t)").format(q='"')
_FLOOD = 'import sys\nwhile True: sys.stdout.write("x" * 1023 + "\\n")'

_SHIM = """#!/bin/sh
# bringup test host: the health agent under this host's faults ({what}: sim/testhosts/agent_faults.py);
# any other use runs the real python3.
if [ "$1" = "-m" ] && [ "$2" = "tools.health" ]; then
{body}
fi
exec {real} "$@"
"""


def _body(faults: HostFaults) -> str:
    lines = [f"  sleep {faults.delay_s:g}"] if faults.delay_s else []
    fault = faults.agent_output
    if faults.endpoint is EndpointFault.hang:
        # Silent until killed: by the controller's timeout closing the session, else when the host stops.
        lines.append("  exec sleep 86400")
    elif fault is OutputFault.flood:
        lines.append(f"  exec {REAL} -c '{_FLOOD}'")
    elif fault is OutputFault.empty:
        lines += [f'  {REAL} "$@" >/dev/null', "  exit $?"]
    elif fault is not None:
        lines += [f'  out=$({REAL} "$@"); rc=$?', f"  printf '%s\\n' \"$out\" | {REAL} -c '{_MANGLE}' {fault.value}",
                  '  exit "$rc"']
    return "\n".join(lines or ["  :"])


def shim(faults: HostFaults) -> str | None:
    """The host's `python3` shim, or None when it has none of these faults."""
    hang = faults.endpoint is EndpointFault.hang
    if not faults.delay_s and faults.agent_output is None and not hang:
        return None
    what = ", ".join(p for p in (f"delay_s {faults.delay_s:g}" if faults.delay_s else "",
                                 f"agent_output {faults.agent_output.value}" if faults.agent_output else "",
                                 "endpoint hang" if hang else "") if p)
    return _SHIM.format(what=what, body=_body(faults), real=REAL)


def install(root: Path, faults: HostFaults) -> bool:
    """The shim on the host (before its sshd starts), when it has one of these faults; whether it did."""
    text = shim(faults)
    if text is None:
        return False
    program = root / PROGRAM
    program.parent.mkdir(parents=True, exist_ok=True)
    program.write_text(text)
    program.chmod(0o755)
    return True
