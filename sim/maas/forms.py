"""The form bodies MAAS's API takes (multipart/form-data, what python-libmaas and the CLI send, or urlencoded)
and the power parameters in them."""

from __future__ import annotations

import json
import urllib.parse
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler


def form(handler: BaseHTTPRequestHandler, body: bytes) -> dict[str, list[str]]:
    ctype = handler.headers.get("Content-Type", "")
    if ctype.startswith("multipart/form-data"):
        message = BytesParser(policy=HTTP).parsebytes(
            f"Content-Type: {ctype}\r\nMIME-Version: 1.0\r\n\r\n".encode() + body
        )
        out: dict[str, list[str]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if isinstance(name, str):
                payload = part.get_payload(decode=True)
                text = payload.decode() if isinstance(payload, bytes) else str(part.get_payload())
                out.setdefault(name, []).append(text)
        return out
    return urllib.parse.parse_qs(body.decode(errors="replace"), keep_blank_values=True)


class BadRequest(Exception):
    """A request MAAS refuses with a plain-text 400 (a Django ValidationError without fields)."""


# Each power driver's settings and which are required, with the labels MAAS's errors name them by
# (provisioningserver/drivers/power/{redfish,ipmi,manual}.py, MAAS 3.5).
POWER_SETTINGS: dict[str, dict[str, tuple[str, bool]]] = {
    "redfish": {"power_address": ("Redfish address", True), "power_user": ("Redfish user", True),
                "power_pass": ("Redfish password", True), "node_id": ("Node ID", False)},
    "ipmi": {"power_driver": ("Power driver", False),  # required, but it has a default (LAN_2_0)
             "power_boot_type": ("Power boot type", False),
             "power_address": ("IP address", True), "power_user": ("Power user", False),
             "power_pass": ("Power password", False), "k_g": ("K_g BMC key", False),
             "cipher_suite_id": ("Cipher Suite ID", False), "privilege_level": ("Privilege Level", False),
             "workaround_flags": ("Workaround Flags", False), "mac_address": ("Power MAC", False),
             "power_off_mode": ("Power off mode", False)},
    "manual": {},
}
PREFIX = "power_parameters_"


def power_parameters(form: dict[str, list[str]], power_type: str) -> tuple[dict[str, str], list[str]]:
    """The power parameters a create form gives, and MAAS's errors about them.

    MAAS takes both forms (maasserver/forms WithPowerTypeMixin and config_forms.DictCharField): one field per
    setting, `power_parameters_<name>` (the API documentation's form, which MAAS's CLI sends), and one JSON
    object in `power_parameters` (what python-libmaas and the Terraform provider send; MAAS's own
    test_POST_create_creates_machine_with_power_parameters enlists with it). The JSON gives each setting's
    default and a separate field wins over it; JSON keys that are not settings of the power type are dropped,
    separate fields that are not are refused ("Unknown parameter(s)"). JSON that does not parse is a
    plain-text 400, as MAAS's middleware answers a ValidationError without fields.
    """
    settings = POWER_SETTINGS.get(power_type, {})
    raw = (form.get("power_parameters") or [""])[0]
    given: dict[str, str] = {}
    if raw.strip():
        try:
            decoded = json.loads(raw)
        except (ValueError, RecursionError):
            raise BadRequest("Failed to parse JSON power_parameters") from None
        if not isinstance(decoded, dict):
            raise BadRequest("Failed to parse JSON power_parameters")
        given = {k: str(v) for k, v in decoded.items() if k in settings and v not in (None, "")}
    separate = {k.removeprefix(PREFIX): v[0] for k, v in form.items() if k.startswith(PREFIX) and v}
    separate.pop("skip_check", None)
    unknown = sorted(set(separate) - set(settings))
    if unknown:
        return {}, [f"Unknown parameter(s): {', '.join(unknown)}."]
    params = {**given, **{k: v for k, v in separate.items() if v != ""}}
    if not params:
        required = any(req for _, req in settings.values())
        return {}, ["This field is required."] if required else []
    missing = [f"{label}: This field is required." for name, (label, req) in settings.items()
               if req and not params.get(name)]
    return params, missing
