"""BMC orchestration: harvest MACs, arm one-time PXE, power control, with triage of every failure."""

from provision.bmc.power import PowerAction, PowerPolicy
from provision.bmc.runner import Fanout, HostResult, RunOptions, harvested
from provision.bmc.triage import Failure, HostProblem, triage

__all__ = ["Failure", "Fanout", "HostProblem", "HostResult", "PowerAction", "PowerPolicy", "RunOptions",
           "harvested", "triage"]
