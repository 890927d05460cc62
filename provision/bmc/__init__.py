"""BMC orchestration: harvest MACs, arm one-time PXE, power control, with triage of every failure."""

from provision.bmc.power import PowerAction, PowerPolicy
from provision.bmc.step import HarvestStep, PowerStep, PxeStep, RunOptions
from provision.bmc.triage import HostProblem, triage

__all__ = ["HarvestStep", "HostProblem", "PowerAction", "PowerPolicy", "PowerStep", "PxeStep", "RunOptions", "triage"]
