"""Redfish error answers as iDRAC9 sends them: a general error with one `@Message.ExtendedInfo` entry.

Every MessageId is `Base.<BASE_VERSION>.<key>`, a message of that version of DMTF's Base message
registry (DSP8011); `BASE_KEYS` lists each key the simulator sends with the Severity that registry
gives it (tests/redfish/test_conformance_protocol.py checks both against the registry file).
"""

from __future__ import annotations

from typing import Any

from sim.redfish.http import Request, Response

BASE_VERSION = "1.13"
# key → Severity, as Base.1.13.0 defines them
BASE_KEYS = {
    "ActionParameterValueConflict": "Warning",
    "ActionParameterValueNotInList": "Warning",
    "GeneralError": "Critical",
    "MalformedJSON": "Critical",
    "NoValidSession": "Critical",
    "OperationNotAllowed": "Critical",
    "PreconditionFailed": "Critical",
    "PropertyMissing": "Warning",
    "PropertyNotWritable": "Warning",
    "PropertyUnknown": "Warning",
    "PropertyValueNotInList": "Warning",
    "QueryCombinationInvalid": "Warning",
    "QueryNotSupported": "Warning",
    "QueryNotSupportedOnResource": "Warning",
    "QueryParameterOutOfRange": "Warning",
    "QueryParameterValueFormatError": "Warning",
    "ResourceMissingAtURI": "Critical",
    "ServiceTemporarilyUnavailable": "Critical",
    "SessionLimitExceeded": "Critical",
    "Success": "OK",
}


def message_id(key: str) -> str:
    if key not in BASE_KEYS:
        raise KeyError(f"{key} is not a Base registry message the simulator sends")
    return f"Base.{BASE_VERSION}.{key}"


def info(key: str, text: str, resolution: str = "None") -> dict[str, str]:
    """One `@Message.ExtendedInfo` entry."""
    return {"Message": text, "MessageId": message_id(key), "Resolution": resolution, "Severity": BASE_KEYS[key]}


def message(status: int, text: str, key: str, resolution: str = "None",
            headers: dict[str, str] | None = None) -> Response:
    return Response.of(status, {"error": {
        "code": message_id("GeneralError"),
        "message": "A general error has occurred. See ExtendedInfo for more information",
        "@Message.ExtendedInfo": [info(key, text, resolution)],
    }}, headers)


def json_object(req: Request) -> dict[str, Any] | Response:
    """The request's body as a JSON object ({} when it is JSON but not an object, so each property reads as
    missing), or the 400 MalformedJSON answer a BMC gives a body that is not JSON at all."""
    try:
        body = req.json()
    except ValueError:
        return message(400, "The request body submitted was malformed JSON.", "MalformedJSON")
    return body if isinstance(body, dict) else {}
