"""BIOS attributes on the host classes' baselines: the apply step (`step.py`), on the firmware package's reads,
judgement, apply base and rollout (`provision/firmware/`). Nothing is imported here."""
