"""The simulated InfiniBand fabric: a cabling design run in ibsim, discovered by the real tools."""

from __future__ import annotations

from sim.ibfabric.harness import IbFabric, IbsimError

__all__ = ["IbFabric", "IbsimError"]
