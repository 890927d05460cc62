"""The body of a Redfish multipart push (`UpdateService.MultipartHttpPushUri`, UpdateService v1_6+). Pure.

DMTF (REFERENCE-wave3 B1; DMTF/Redfish-Tacklebox `redfish_utilities/update.py` multipart_push_update): a
`multipart/form-data` POST with a part `UpdateParameters` (application/json: `Targets`,
`@Redfish.OperationApplyTime`...) and a part `UpdateFile` (application/octet-stream, with a filename). The
service answers 202 with the task monitor in `Location`, as for SimpleUpdate. Where a BMC offers no SimpleUpdate
(NVIDIA's HGX/GB300 BMC: only `MultipartHttpPushUri`, tests/fixtures/redfish/firmware/supermicro_gb300), this is
how the image reaches it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any


def multipart_body(parameters: Mapping[str, Any], filename: str, image: bytes,
                   boundary: str | None = None) -> tuple[str, bytes]:
    """(Content-Type with its boundary, body) of a multipart push of `image`."""
    mark = boundary or f"bringup-{secrets.token_hex(16)}"
    if mark.encode() in image:  # a boundary must not occur in the parts; a random one never does in practice
        return multipart_body(parameters, filename, image)
    safe = "".join(c for c in filename if c.isalnum() or c in "._-") or "image.bin"
    head = (f"--{mark}\r\nContent-Disposition: form-data; name=\"UpdateParameters\"\r\n"
            f"Content-Type: application/json\r\n\r\n{json.dumps(dict(parameters))}\r\n"
            f"--{mark}\r\nContent-Disposition: form-data; name=\"UpdateFile\"; filename=\"{safe}\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n").encode()
    return f"multipart/form-data; boundary={mark}", head + image + f"\r\n--{mark}--\r\n".encode()
