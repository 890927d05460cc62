"""Power control and the one-time PXE boot override, on a ComputerSystem already found.

Reset types and boot targets are checked against the BMC's `@Redfish.AllowableValues` before they are
sent; the boot PATCH carries the system's ETag as `If-Match` when the BMC offers one (a 412 means
someone changed the system meanwhile: read it again and retry once).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from enum import StrEnum
from typing import Any

from provision.bmc.triage import HostProblem
from provision.redfish import RedfishClient, RedfishRequestRejected, RedfishUnsupported, Resource


class PowerAction(StrEnum):
    on = "on"
    off = "off"
    cycle = "cycle"
    status = "status"


# The PowerState each reset bringup sends should leave the server in (what an intent's read-back looks for).
RESET_TARGET = {"ForceOff": "Off", "On": "On", "ForceRestart": "On"}
BOOT_KEYS = ("BootSourceOverrideTarget", "BootSourceOverrideEnabled")


class PowerPolicy(StrEnum):
    """What pxe-boot does to a server that is already on."""

    off_on = "off-on"  # ForceOff, wait until Off, then On
    restart = "restart"  # ForceRestart


def etag_of(resource: Resource) -> str | None:
    tag = resource.etag or resource.data.get("@odata.etag")
    return tag if isinstance(tag, str) and tag else None


def power_state(system: Resource) -> str:
    state = system.data.get("PowerState")
    return state if isinstance(state, str) else "Unknown"


def _allowed(data: Mapping[str, Any], key: str) -> list[str] | None:
    values = data.get(f"{key}@Redfish.AllowableValues")
    return [str(v) for v in values] if isinstance(values, list) else None


async def reset(client: RedfishClient, system: Resource, kind: str) -> None:
    actions = system.data.get("Actions")
    action = actions.get("#ComputerSystem.Reset") if isinstance(actions, Mapping) else None
    target = action.get("target") if isinstance(action, Mapping) else None
    if not isinstance(target, str):
        raise RedfishUnsupported("the ComputerSystem offers no #ComputerSystem.Reset action",
                                 endpoint=client.endpoint, path=system.path)
    allowed = _allowed(action, "ResetType") if isinstance(action, Mapping) else None
    if allowed is not None and kind not in allowed:
        raise RedfishUnsupported(f"ResetType {kind} is not offered (allowed: {', '.join(allowed)})",
                                 endpoint=client.endpoint, path=target)
    await client.post(target, {"ResetType": kind})


async def wait_power(client: RedfishClient, path: str, want: str, timeout_s: float, poll_s: float,
                     after: str) -> Resource:
    """Read the system every `poll_s` until PowerState is `want`; the first read comes one interval
    after the reset, since no server changes power state within a round trip of being asked."""
    deadline = time.monotonic() + timeout_s
    while True:
        await asyncio.sleep(max(0.0, min(poll_s, deadline - time.monotonic())))
        system = await client.get(path)
        state = power_state(system)
        if state == want:
            return system
        if time.monotonic() >= deadline:
            status = system.data.get("Status")
            raise HostProblem("power_fault", f"PowerState is still {state} {timeout_s:g} s after {after}",
                              {"power_state": state, "status": status, "after": after})


async def power(client: RedfishClient, system: Resource, action: PowerAction, *, timeout_s: float,
                poll_s: float, asking: Callable[[str], Awaitable[None]] | None = None) -> dict[str, Any]:
    """Carry out a power action and wait until PowerState says it happened. Returns what was done.
    `asking(reset type)` is awaited before each reset is sent (the caller's intent); a second reset is only
    asked once the first one's read-back showed it done."""
    before = power_state(system)
    done: list[str] = []
    if action is PowerAction.status:
        return {"power_state": before, "health": (system.data.get("Status") or {}).get("HealthRollup")}
    if action in (PowerAction.off, PowerAction.cycle) and before != "Off":
        if asking is not None:
            await asking("ForceOff")
        await reset(client, system, "ForceOff")
        done.append("ForceOff")
        await wait_power(client, system.path, "Off", timeout_s, poll_s, "ForceOff")
    if action in (PowerAction.on, PowerAction.cycle) and (before != "On" or action is PowerAction.cycle):
        if asking is not None:
            await asking("On")
        await reset(client, system, "On")
        done.append("On")
        await wait_power(client, system.path, "On", timeout_s, poll_s, "On")
    after = "Off" if action is PowerAction.off else "On"
    return {"power_before": before, "resets": done, "power_state": after}


def confirm_armed(armed: dict[str, Any], system: Resource) -> dict[str, Any]:
    """Check a read of the system (taken before the server booted) shows the override that was sent;
    raises `pxe_not_armed` otherwise. Returns `armed` with what the BMC reported."""
    sent: dict[str, Any] = armed["boot_sent"]
    now = system.data.get("Boot")
    seen = {k: now.get(k) for k in sent} if isinstance(now, Mapping) else {}
    if any(seen.get(k) != v for k, v in sent.items()):
        raise HostProblem("pxe_not_armed", f"after the PATCH the BMC reports Boot {seen}, not {sent}",
                          {"sent": sent, "seen": seen})
    return {**armed, "boot_armed": seen}


async def arm_pxe_once(client: RedfishClient, system: Resource, mode: str | None, *,
                       verify: bool = True) -> dict[str, Any]:
    """PATCH Boot {Pxe, Once} (and the override mode when the site wants one) and check it took: from
    the PATCH answer when the BMC returns the resource, else by reading the system again. With
    `verify=False` the caller checks with `confirm_armed` on a read it makes anyway (before any boot)."""
    boot = system.data.get("Boot")
    if not isinstance(boot, Mapping):
        raise RedfishUnsupported("the ComputerSystem has no Boot property", endpoint=client.endpoint,
                                 path=system.path)
    targets = _allowed(boot, "BootSourceOverrideTarget")
    if targets is not None and "Pxe" not in targets:
        raise RedfishUnsupported(f"BootSourceOverrideTarget Pxe is not offered (allowed: {', '.join(targets)})",
                                 endpoint=client.endpoint, path=system.path)
    body: dict[str, Any] = {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}
    if mode is not None:
        modes = _allowed(boot, "BootSourceOverrideMode")
        if modes is not None and mode not in modes:
            raise RedfishUnsupported(f"BootSourceOverrideMode {mode} is not offered (allowed: {', '.join(modes)})",
                                     endpoint=client.endpoint, path=system.path)
        if "BootSourceOverrideMode" in boot or modes is not None:
            body["BootSourceOverrideMode"] = mode
    try:
        answer = await client.patch(system.path, {"Boot": body}, etag=etag_of(system))
    except RedfishRequestRejected as exc:
        if exc.status != 412:
            raise
        system = await client.get(system.path)
        answer = await client.patch(system.path, {"Boot": body}, etag=etag_of(system))
    armed = {"boot_before": {k: boot.get(k) for k in body}, "boot_sent": body, "etag_used": etag_of(system) is not None}
    if isinstance(answer.data.get("Boot"), Mapping):  # a BMC that answers a PATCH with the resource
        return confirm_armed(armed, answer)
    if not verify:
        return armed
    return confirm_armed(armed, await client.get(system.path))
