"""Prometheus metrics of the bring-up: the textfile writer every stage shares, the stage and lifecycle
metrics the step runner writes, and the scrape targets generated from the state store."""
