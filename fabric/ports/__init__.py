"""Fabric port health: evidence (UFM events, port counters, link state) -> a plan of links to disable."""
