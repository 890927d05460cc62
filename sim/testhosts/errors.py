"""Errors of the Debian test hosts (debootstrap, the stand-in repository, chroots and their sshd)."""

from __future__ import annotations

from provision.errors import BringupError


class TestHostError(BringupError):
    """A test host could not be built, started or stopped; the message says which step and why."""

    __test__ = False  # not a pytest test class


class CommandFailed(TestHostError):
    def __init__(self, argv: list[str], rc: int, output: str) -> None:
        tail = "\n".join(output.strip().splitlines()[-15:])
        super().__init__(f"{' '.join(argv[:4])}{' ...' if len(argv) > 4 else ''} failed (rc {rc}):\n{tail}")
        self.argv = argv
        self.rc = rc
