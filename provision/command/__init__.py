"""What every command line of the project stands on (provision's, fabric's, sim's, the inventory script's): the
exit-code table and the one error path (`exits.py`), the options several commands share (`options.py`), the
site and its state store a command starts from (`context.py`), and output that masks held secrets
(`output.py`). It sits below `provision/cli/` and `fabric/`, which both build on it, and imports neither."""
