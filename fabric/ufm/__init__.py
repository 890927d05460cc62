"""Readers of what NVIDIA UFM reports: its event log, REST events, ports and links."""
