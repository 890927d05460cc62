"""`python -m provision`: the same CLI as the `provision` script, where the package is not installed."""

from provision.cli import entry

entry()
