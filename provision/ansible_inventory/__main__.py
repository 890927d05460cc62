"""`python -m provision.ansible_inventory [--list | --host H | --export ini|yaml] [--site S] [--db D]`.

`--list`/`--host` follow Ansible's script-inventory protocol; `--export` writes a static file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from provision.ansible_inventory.build import load_inventory
from provision.ansible_inventory.export import to_ini, to_yaml
from provision.cli.context import default_site_path
from provision.errors import BringupError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m provision.ansible_inventory", description=__doc__)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="the whole inventory as JSON")
    action.add_argument("--host", help="one host's variables as JSON")
    action.add_argument("--export", choices=("ini", "yaml"), help="a static inventory file")
    parser.add_argument("--site", type=Path, help="site file (default: $BRINGUP_SITE, else the embedded site)")
    parser.add_argument("--db", type=Path,
                        help="state database (default: $BRINGUP_STATE_DB, else state/<site>.db beside the site)")
    parser.add_argument("--output", "-o", type=Path, help="write here instead of stdout")
    args = parser.parse_args(argv)
    try:
        inventory = load_inventory(args.site or default_site_path(), args.db)
    except BringupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.list:
        text = json.dumps(inventory.as_list(), indent=2, sort_keys=True)
    elif args.host:
        text = json.dumps(dict(inventory.hostvars.get(args.host, {})), indent=2, sort_keys=True)
    else:
        text = to_ini(inventory) if args.export == "ini" else to_yaml(inventory)
    if args.output:
        args.output.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
