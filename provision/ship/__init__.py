"""`provision ship`: the training environment's archive (`python -m training pack-env`) to every host."""
