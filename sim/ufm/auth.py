"""UFM's three ways in, as NVIDIA's REST API guide gives them ("REST API Complementary Information",
"Examples of REST APIs Using Various Authentication Types"; UFM Enterprise User Manual, "Token-based
Authentication"):

- basic: `curl -u <user>:<password> https://<ufm>/ufmRest/...`, HTTP Basic on the `/ufmRest` prefix;
- session: `curl -f -X POST -c cookies.txt -d httpd_username=<user> -d httpd_password=<password>
  https://<ufm>/dologin` (UFM's Apache login form), then `/ufmRestV2/...` with that cookie;
- token: an access token made in UFM's Settings > Access Tokens, or by `POST /ufmRest/app/tokens` (only a
  system_admin may), sent as `Authorization: Basic <token>` on the `/ufmRestV3` prefix.

Each prefix takes only its own kind: Basic credentials on `/ufmRestV3`, or a session cookie on `/ufmRest`, are
401 as on a real UFM, so a client that mixes them up fails here first. A refused login is 401 (the guide's
`curl -f` fails on it); a revoked token or a dropped session is 401 again.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from sim.redfish.http import Request

PREFIXES = {"/ufmRest/": "basic", "/ufmRestV2/": "session", "/ufmRestV3/": "token"}
SESSION_COOKIE = "session"
TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"  # as the guide's example token


def _cookie(request: Request, name: str) -> str | None:
    for part in request.headers.get("cookie", "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


@dataclass
class UfmAuth:
    user: str
    password: str
    tokens: set[str] = field(default_factory=set)
    sessions: set[str] = field(default_factory=set)

    def _basic_ok(self, request: Request) -> bool:
        expected = "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        return hmac.compare_digest(request.headers.get("authorization", ""), expected)

    def _token_ok(self, request: Request) -> bool:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return scheme == "Basic" and any(hmac.compare_digest(token, t) for t in self.tokens)

    def _session_ok(self, request: Request) -> bool:
        value = _cookie(request, SESSION_COOKIE)
        return value is not None and any(hmac.compare_digest(value, s) for s in self.sessions)

    def resolve(self, request: Request) -> str | None:
        """The request's path under `/ufmRest/` when its prefix's kind of credential is good; None: 401."""
        path = request.path
        for prefix, kind in PREFIXES.items():
            if path.startswith(prefix):
                ok = {"basic": self._basic_ok, "session": self._session_ok, "token": self._token_ok}[kind](request)
                return "/ufmRest/" + path[len(prefix):] if ok else None
        return None

    def login(self, request: Request) -> str | None:
        """`POST /dologin` (form fields httpd_username, httpd_password): a new session's cookie, or None."""
        form = parse_qs(request.body.decode("utf-8", errors="replace"))
        user = (form.get("httpd_username") or [""])[0]
        password = (form.get("httpd_password") or [""])[0]
        if not (hmac.compare_digest(user, self.user) and hmac.compare_digest(password, self.password)):
            return None
        session = secrets.token_hex(16)
        self.sessions.add(session)
        return session

    def new_token(self) -> str:
        token = "".join(secrets.choice(TOKEN_CHARS) for _ in range(30))
        self.tokens.add(token)
        return token

    def drop_sessions(self) -> None:
        """Every session expired (UFM's session timeout), as a fault or a test does."""
        self.sessions.clear()
