"""How the MAAS simulator powers a machine on: the Redfish calls MAAS's power driver makes to its BMC."""

from __future__ import annotations

import httpx


class PowerError(Exception):
    """The BMC could not be reached or refused a call; MAAS fails the action with this message."""


def redfish_power_on(params: dict[str, str], timeout_s: float = 10.0) -> None:
    """What MAAS's Redfish power driver does to power a machine on for a PXE boot."""
    address = params.get("power_address", "")
    base = address if address.startswith("http") else f"https://{address}"
    auth = (params.get("power_user", ""), params.get("power_pass", ""))
    try:
        with httpx.Client(base_url=base, auth=auth, verify=False, timeout=timeout_s) as bmc:
            node_id = params.get("node_id")
            if not node_id:
                systems = bmc.get("/redfish/v1/Systems")
                systems.raise_for_status()
                node_id = systems.json()["Members"][0]["@odata.id"].rstrip("/").rsplit("/", 1)[-1]
            path = f"/redfish/v1/Systems/{node_id}"
            system = bmc.get(path)
            system.raise_for_status()
            headers = {"If-Match": system.headers["ETag"]} if "ETag" in system.headers else {}
            boot = {"Boot": {"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "Pxe"}}
            bmc.patch(path, json=boot, headers=headers).raise_for_status()
            reset = f"{path}/Actions/ComputerSystem.Reset"
            if system.json().get("PowerState") == "On":
                bmc.post(reset, json={"ResetType": "ForceOff"}).raise_for_status()
            bmc.post(reset, json={"ResetType": "On"}).raise_for_status()
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
        raise PowerError(f"Failed to power on via Redfish at {address}: {exc}") from None
