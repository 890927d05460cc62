"""The site file's scalar field types, shared by the site model and the modules it is built from."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated

from pydantic import AfterValidator, Field

_HOSTNAME_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def check_address(value: str) -> str:
    """An IPv4/IPv6 literal or an RFC 1123 host name."""
    try:
        ipaddress.ip_address(value)
        return value
    except ValueError:
        pass
    if re.fullmatch(r"[0-9.]+", value):
        raise ValueError("not an IP address or hostname")
    labels = value.rstrip(".").split(".")
    if len(value) > 253 or not all(_HOSTNAME_LABEL.match(label) for label in labels):
        raise ValueError("not an IP address or hostname")
    return value


def _check_hostname(value: str) -> str:
    if not _HOSTNAME_LABEL.match(value):
        raise ValueError("not a valid host name (letters, digits and '-', at most 63, no leading '-')")
    return value


Address = Annotated[str, AfterValidator(check_address)]
Hostname = Annotated[str, AfterValidator(_check_hostname)]
Port = Annotated[int, Field(ge=1, le=65535)]
