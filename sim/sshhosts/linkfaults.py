"""Link faults of the simulated fabric (`fabric-faults.yml` beside the site file), shared by the fabric and
the `ib_write_bw` stand-in:

    links:
      - {port: gpu-r1-02/mlx5_3[1], fault: width, width: 1X}              # trains at 1X (ibsim `w=1`)
      - {port: leaf-A-r3-U40[21], fault: lossy, loss: 0.4, symbol_errors: 40}  # flows lose 40%, and each
                                                                          #   flow adds 40 symbol errors at
                                                                          #   this port (PerformanceSet)

A port is `<design node>[<port>]`, a node as the site's fabric design names it (a switch, or host/hca).
`width` faults are built into the ibsim net file when the lab's fabric starts (`apply_widths`); `lossy`
ones lower the stand-in's rate on every flow crossing that link and raise the port's error counters in
ibsim, as a dirty connector does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fabric.design import Port
from provision.errors import BringupError
from sim.asbuilt import AsBuilt

FILE_NAME = "fabric-faults.yml"
_PORT = re.compile(r"^(\S+)\[(\d+)\]$")


class LinkFaultsError(BringupError):
    """The fabric faults file is unreadable or names a port the design does not have."""


class LinkFault(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    port: str = Field(pattern=_PORT.pattern)
    fault: Literal["width", "lossy"]
    width: Literal["1X", "2X", "4X", "8X", "12X"] | None = None
    loss: float = Field(default=0.0, ge=0.0, lt=1.0)
    symbol_errors: int = Field(default=0, ge=0, le=1_000_000)

    @property
    def design_port(self) -> Port:
        m = _PORT.match(self.port)
        assert m is not None  # the field's pattern
        return Port(m.group(1), int(m.group(2)))


class LinkFaults(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    links: list[LinkFault] = Field(default_factory=list, max_length=10_000)

    @property
    def lossy(self) -> list[LinkFault]:
        return [f for f in self.links if f.fault == "lossy"]


def load_link_faults(path: Path | None) -> LinkFaults:
    if path is None or not path.is_file():
        return LinkFaults()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        return LinkFaults.model_validate(data)
    except (OSError, yaml.YAMLError) as exc:
        raise LinkFaultsError(f"{path}: cannot read ({exc})") from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise LinkFaultsError(f"{path}: {problems}") from None


def apply_widths(asbuilt: AsBuilt, faults: LinkFaults) -> None:
    """Width faults into the as-built cabling (before ibsim starts): the link trains at that width."""
    for f in faults.links:
        if f.fault != "width" or f.width is None:
            continue
        if f.design_port not in asbuilt.plugs:
            raise LinkFaultsError(f"fabric faults: {f.port} is not a cabled port of the design")
        asbuilt.degrade(f.design_port, width=f.width)
