"""`FabricDiags`: the site's say over how bringup runs the infiniband-diags tools (`fabric.diags` in the site file).

Each tool may print only so much before it is killed as a runaway (fabric/toolrun.py `max_output_of`); the
built-in caps are sized for a fabric twice Selene's (666 switches, ~4.3k HCAs). A larger fabric raises the cap
of the tool that outgrows it, by the tool's name, in MiB:

    fabric:
      diags:
        max_output_mib: {dump_lfts: 8192}     # a line per LID per switch: 32k HCAs on 8 rails print several GB
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")
MAX_CAP_MIB = 1 << 16  # 64 GiB: past this the tool's output would not fit a controller's memory anyway


class FabricDiags(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_output_mib: dict[str, int] = Field(
        default_factory=dict, description="tool name (dump_lfts, ibnetdiscover, perfquery...) → the most it may "
        "print, in MiB, before it is killed; replaces that tool's built-in cap (fabric/toolrun.py)")

    @field_validator("max_output_mib")
    @classmethod
    def _plain_tools_and_sane_caps(cls, value: dict[str, int]) -> dict[str, int]:
        for tool, mib in value.items():
            if not _TOOL_NAME.match(tool):
                raise ValueError(f"{tool!r} is not a tool's name (dump_lfts, perfquery...): no path, no spaces")
            if not 1 <= mib <= MAX_CAP_MIB:
                raise ValueError(f"{tool}'s cap of {mib} MiB is outside 1..{MAX_CAP_MIB} MiB")
        return value

    def max_output_bytes(self) -> dict[str, int]:
        return {tool: mib << 20 for tool, mib in self.max_output_mib.items()}
