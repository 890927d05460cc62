from provision.cli import entry

entry()
