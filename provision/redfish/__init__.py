"""Redfish: an async client for one BMC, typed errors, and resource discovery by `@odata.id` links."""

from provision.redfish.client import RedfishClient
from provision.redfish.errors import (
    NOT_SERVED,
    RedfishAuthError,
    RedfishError,
    RedfishNotFound,
    RedfishProtocolError,
    RedfishRequestRejected,
    RedfishServerError,
    RedfishTimeout,
    RedfishTlsError,
    RedfishUnreachable,
    RedfishUnsupported,
)
from provision.redfish.options import ClientOptions
from provision.redfish.resource import Resource, first_link, odata_id

__all__ = [
    "NOT_SERVED",
    "ClientOptions",
    "RedfishAuthError",
    "RedfishClient",
    "RedfishError",
    "RedfishNotFound",
    "RedfishProtocolError",
    "RedfishRequestRejected",
    "RedfishServerError",
    "RedfishTimeout",
    "RedfishTlsError",
    "RedfishUnreachable",
    "RedfishUnsupported",
    "Resource",
    "first_link",
    "odata_id",
]
