"""The form bodies MAAS's API takes: multipart/form-data (what python-libmaas and the CLI send) or urlencoded."""

from __future__ import annotations

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
