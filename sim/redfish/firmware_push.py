"""The simulated iDRAC's multipart push (`UpdateService.MultipartHttpPushUri`, `/redfish/v1/UpdateService/
MultipartUpload` on an iDRAC9: REFERENCE-wave3 B4, dell/iDRAC-Redfish-Scripting DeviceFirmwareMultipartUploadREDFISH):
a `multipart/form-data` body with the parts `UpdateParameters` (JSON) and `UpdateFile` (the image), per DMTF's
UpdateService v1_6 and DMTF/Redfish-Tacklebox's multipart_push_update. Parsed with the standard library's MIME
parser; what is missing or malformed is the 400 the iDRAC answers."""

from __future__ import annotations

import json
from email import policy
from email.parser import BytesParser
from typing import Any


def parse_push(content_type: str, body: bytes) -> tuple[dict[str, Any], bytes] | str:
    """(UpdateParameters, UpdateFile's bytes), or why the request is malformed."""
    if not content_type.lower().startswith("multipart/form-data") or "boundary=" not in content_type:
        return "the request is not multipart/form-data with a boundary"
    message = BytesParser(policy=policy.HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    if not message.is_multipart():
        return "no parts in the multipart body"
    parts: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            parts[name] = payload
    if "UpdateFile" not in parts:
        return "the multipart body has no UpdateFile part"
    try:
        params = json.loads(parts.get("UpdateParameters", b"{}") or b"{}")
    except ValueError:
        return "UpdateParameters is not JSON"
    if not isinstance(params, dict):
        return "UpdateParameters is not a JSON object"
    return params, parts["UpdateFile"]
