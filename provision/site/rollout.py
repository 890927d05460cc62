"""The site's `rollout` section: how `site.yml` reaches a fleet (the apt cache, the batches, the parallelism).

    rollout:
      apt_proxy: http://ctl-01:3142     # the controller's apt cache (playbooks/controller.yml), as the hosts reach it
      batches: [1, "10%"]               # Ansible `serial`: a canary host, then 10% of the hosts at a time
      max_fail_percentage: 0            # a batch with more failed hosts than this stops the run before the next
      forks: 64                         # hosts configured at once (within a batch)

The Ansible side reads it through the inventory (`bringup_rollout`, for the roles) and the `bringup_rollout`
lookup (play keywords such as `serial`, which Ansible templates without inventory variables); see roles/README.md.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, field_validator

# Ansible's `serial` accepts host counts and percentages of the play's hosts.
_PERCENT = re.compile(r"^(100|[1-9][0-9]?)%$")


def _check_batch(value: int | str) -> int | str:
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"a batch of {value} hosts: give at least 1 (or a percentage such as '10%')")
        return value
    if not _PERCENT.match(value):
        raise ValueError(f"batch {value!r} is neither a host count nor a percentage from 1% to 100%")
    return value


Batch = Annotated[int | str, Field(union_mode="left_to_right")]


class Rollout(BaseModel):
    """How site.yml rolls out to the GPU hosts; the defaults configure every host at once, 16 at a time."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    apt_proxy: HttpUrl | None = Field(
        default=None,
        description="the apt cache on the controller as the GPU hosts reach it (http://host:port, no path); "
        "none: the hosts fetch from their sources directly",
    )
    batches: list[Batch] = Field(
        default_factory=lambda: list[int | str](["100%"]), min_length=1, max_length=32,
        description="Ansible serial: the size of each batch (host count or percentage), the last one repeated",
    )
    max_fail_percentage: float = Field(
        default=0, ge=0, le=100,
        description="failed hosts (percent of their batch) above which the run stops before the next batch",
    )
    forks: int = Field(default=16, ge=1, le=1024, description="hosts configured at the same time")

    @field_validator("apt_proxy")
    @classmethod
    def _plain_http_proxy(cls, value: HttpUrl | None) -> HttpUrl | None:
        if value is None:
            return value
        if value.scheme != "http":
            raise ValueError("apt_proxy must be an http:// URL (apt talks plain HTTP to a caching proxy)")
        if value.username or value.password:
            raise ValueError("apt_proxy must not carry credentials (they would land in /etc/apt on every host)")
        if (value.path or "/") != "/" or value.query or value.fragment:
            raise ValueError("apt_proxy is the proxy's address only (http://host:port), without a path")
        return value

    @field_validator("batches")
    @classmethod
    def _batches(cls, value: list[int | str]) -> list[int | str]:
        return [_check_batch(batch) for batch in value]

    def as_vars(self) -> dict[str, object]:
        """What the inventory hands the roles as `bringup_rollout` (the proxy as a string, "" for none)."""
        proxy = str(self.apt_proxy).rstrip("/") if self.apt_proxy else ""
        return {"apt_proxy": proxy, "apt_proxy_port": self.apt_proxy.port if self.apt_proxy else None,
                "apt_proxy_host": self.apt_proxy.host if self.apt_proxy else None,
                "batches": list(self.batches), "max_fail_percentage": self.max_fail_percentage, "forks": self.forks}
