"""Redfish sessions of one simulated BMC, with the semantics DSP0266 gives them
("Redfish session login authentication").

- `POST SessionService/Sessions` creates one: 201, the session in the body, its URI in `Location` and
  its token in `X-Auth-Token`;
- the token authenticates every later request; each session is a member of the Sessions collection
  and can be read there (GET) and ended there (DELETE: the token stops working at once);
- a session not used for `SessionTimeout` seconds expires (SessionService.SessionTimeout);
- the service holds a bounded number of sessions (iDRAC9: 16), so a client that never logs out runs out.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

MAX_SESSIONS = 16
SESSION_TYPE = "#Session.v1_3_0.Session"


@dataclass
class Session:
    id: str
    username: str
    path: str
    last_used: float


@dataclass
class SessionTable:
    collection: str  # the Sessions collection's URI
    timeout_s: float
    by_token: dict[str, Session] = field(default_factory=dict)
    _next_id: int = 1

    def __len__(self) -> int:
        self._expire()
        return len(self.by_token)

    def _expire(self) -> None:
        now = time.monotonic()
        for token, s in list(self.by_token.items()):
            if now - s.last_used > self.timeout_s:
                del self.by_token[token]

    def create(self, username: str) -> tuple[str, Session] | None:
        """A new session and its token, or None when the table is full."""
        self._expire()
        if len(self.by_token) >= MAX_SESSIONS:
            return None
        token = secrets.token_hex(16)
        sid = str(self._next_id)
        self._next_id += 1
        session = Session(sid, username, f"{self.collection}/{sid}", time.monotonic())
        self.by_token[token] = session
        return token, session

    def use(self, token: str) -> bool:
        """Whether the token names a live session (and marks it used)."""
        session = self.by_token.get(token)
        if session is None:
            return False
        now = time.monotonic()
        if now - session.last_used > self.timeout_s:
            del self.by_token[token]
            return False
        session.last_used = now
        return True

    def by_id(self, sid: str) -> Session | None:
        self._expire()
        return next((s for s in self.by_token.values() if s.id == sid), None)

    def delete(self, sid: str) -> bool:
        for token, s in list(self.by_token.items()):
            if s.id == sid:
                del self.by_token[token]
                return True
        return False

    def clear(self) -> None:
        self.by_token.clear()

    def members(self) -> list[str]:
        self._expire()
        return [s.path for s in sorted(self.by_token.values(), key=lambda s: int(s.id))]


def session_resource(session: Session) -> dict[str, Any]:
    """The Session resource (Session schema; `Password` is write-only, so never sent)."""
    return {
        "@odata.context": "/redfish/v1/$metadata#Session.Session",
        "@odata.id": session.path,
        "@odata.type": SESSION_TYPE,
        "Description": "User Session",
        "Id": session.id,
        "Name": "User Session",
        "UserName": session.username,
    }
