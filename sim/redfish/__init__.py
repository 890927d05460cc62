"""The multi-BMC Redfish simulator: one asyncio process serving an iDRAC9-shaped BMC per site host."""
