"""A real Slurm for the lab (lab.py)."""
