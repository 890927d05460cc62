"""Redfish error answers as iDRAC9 sends them: a general error with one `@Message.ExtendedInfo` entry."""

from __future__ import annotations

from sim.redfish.http import Response


def message(status: int, text: str, message_id: str, resolution: str = "None") -> Response:
    return Response.of(status, {"error": {
        "code": "Base.1.12.GeneralError",
        "message": "A general error has occurred. See ExtendedInfo for more information",
        "@Message.ExtendedInfo": [{"Message": text, "MessageId": message_id, "Resolution": resolution,
                                   "Severity": "Critical" if status >= 500 else "Warning"}],
    }})
