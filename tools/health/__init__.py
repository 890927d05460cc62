"""Node-side health agent: stdlib-only checks of one GPU host (see tools/README.md)."""
