"""The commands around a training job: `provision ship` (its environment to the hosts) and `provision
anomalies` (its diagnoses into the hosts' history). Loaded together, so the app always has several
commands (Typer treats an app of one command as that command)."""

import provision.cli.anomaly_cmds
import provision.cli.ship_cmds

__all__ = ["provision"]
