"""Slurm, the scheduler the golden set is published to: a typed client over Slurm's own commands
(`client.py`), what they answer (`nodes.py`), bringup's drain reasons (`reasons.py`) and the sync that keeps
node states in step with the lifecycle (`sync.py`, `provision slurm sync`)."""
