"""Controller-side health: the node agent on every host over SSH, verdicts into the lifecycle, golden set."""
