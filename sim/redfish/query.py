"""The query parameters of a GET (DSP0266 7.3): `$expand`, `$select` and `only` parsed and checked, with the
error answer for a malformed or unsupported one, and `$select` applied to one resource."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from sim.redfish import tree
from sim.redfish.http import Response
from sim.redfish.messages import message

_EXPAND = re.compile(r"^([.*~])(?:\(\$levels=(\d+)\))?$")
_ALWAYS_SELECTED = ("@odata.context", "@odata.etag", "@odata.id", "@odata.type")


@dataclass(frozen=True)
class Query:
    """The query parameters of one GET, parsed and checked."""

    expand: tuple[str, int] | None = None  # (mode, levels)
    select: tuple[str, ...] | None = None
    only: bool = False


def parse_query(query: str) -> Query | Response:
    """A `Query`, or the error answer DSP0266 7.3 asks for."""
    if not query:
        return Query()
    expand: tuple[str, int] | None = None
    select: tuple[str, ...] | None = None
    only = False
    params = parse_qsl(query, keep_blank_values=True)
    for name, value in params:
        if name == "$expand":
            match = _EXPAND.match(value)
            if match is None:
                return message(400, f"The value '{value}' for the parameter $expand is of a different format than "
                               "the parameter can accept.", "QueryParameterValueFormatError",
                               "Correct the value for the query parameter in the request and resubmit the request.")
            levels = int(match.group(2) or 1)
            if not 1 <= levels <= tree.EXPAND_MAX_LEVELS:
                return message(400, f"The value '{levels}' for the query parameter $levels is out of range 1 to "
                               f"{tree.EXPAND_MAX_LEVELS}.", "QueryParameterOutOfRange",
                               "Reduce the value for the query parameter to a value that is within range.")
            expand = (match.group(1), levels)
        elif name == "$select":
            names = tuple(n.strip() for n in value.split(",") if n.strip())
            if not names:
                return message(400, "The value '' for the parameter $select is of a different format than the "
                               "parameter can accept.", "QueryParameterValueFormatError")
            select = names
        elif name == "only":
            if value:
                return message(400, f"The value '{value}' for the parameter only is of a different format than the "
                               "parameter can accept.", "QueryParameterValueFormatError",
                               "Use only without a value.")
            only = True
        elif name.startswith("$"):
            return message(501, f"The query parameter {name} is not supported by this service.",
                           "QueryNotSupported", "Remove the query parameter and resubmit the request.")
    if only and len(params) > 1:
        return message(400, "The query parameter only cannot be combined with other query parameters.",
                       "QueryCombinationInvalid", "Remove the other query parameters and resubmit.")
    return Query(expand, select, only)


def select_properties(data: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """`$select` on one resource: the named properties (`A/B` for nested ones) and the OData ones."""
    out: dict[str, Any] = {k: data[k] for k in _ALWAYS_SELECTED if k in data}
    for name in names:
        parts = name.split("/")
        value: Any = data
        for part in parts:
            value = value.get(part, _MISSING) if isinstance(value, dict) else _MISSING
        if value is _MISSING:
            continue
        target = out
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = value
    return out


_MISSING = object()
