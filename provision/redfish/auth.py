"""How requests to one BMC authenticate: not at all, Basic on every request, or a Redfish session's token."""

from __future__ import annotations

import base64
from typing import Literal

from provision.site.credentials import Login

AuthMode = Literal["session", "basic"]


class BmcAuth:
    """The login to one BMC and the way it is used now; `headers()` are the request headers with the credential.

    The credential header is built when the way of authenticating changes, not per request (Basic
    means a base64 of the password each time otherwise).
    """

    def __init__(self, login: Login | None, mode: AuthMode, base_headers: dict[str, str]) -> None:
        self.login = login
        self.mode = mode
        self.session_path: str | None = None
        self._base_headers = base_headers
        self._headers: dict[str, str] | None = None
        self._token: str | None = None
        self._basic = False

    @property
    def token(self) -> str | None:
        return self._token

    @token.setter
    def token(self, value: str | None) -> None:
        self._token = value
        self._headers = None

    @property
    def basic(self) -> bool:
        return self._basic

    @basic.setter
    def basic(self, value: bool) -> None:
        self._basic = value
        self._headers = None

    def headers(self) -> dict[str, str]:
        if self._headers is None:
            self._headers = {**self._base_headers, **self._credential()}
        return self._headers

    def session_body(self) -> dict[str, str]:
        """The body of the POST that creates a session."""
        assert self.login is not None
        return {"UserName": self.login.username, "Password": self.login.password.reveal()}

    def _credential(self) -> dict[str, str]:
        if self._token:
            return {"X-Auth-Token": self._token}
        if self.login is not None and (self._basic or self.mode == "basic"):
            raw = f"{self.login.username}:{self.login.password.reveal()}".encode()
            return {"Authorization": "Basic " + base64.b64encode(raw).decode()}
        return {}
