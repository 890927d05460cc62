"""Redfish: an async client for one BMC, typed errors, and resource discovery by `@odata.id` links."""

from provision.redfish.client import ClientOptions, RedfishClient, Resource, odata_id, tls_context
from provision.redfish.errors import (
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

__all__ = [
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
    "odata_id",
    "tls_context",
]
