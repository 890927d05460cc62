"""Lifecycle steps: the table of every step (`pipeline`), what a step declares (`spec`), and the one runner
(`runner`) that owns concurrency, deadlines, recording (`recorder`: group commit) and results."""
