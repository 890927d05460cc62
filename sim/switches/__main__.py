"""`python -m sim.switches ASBUILT.json`: serve the as-built file's switches until killed."""

from __future__ import annotations

import sys
from pathlib import Path

from sim.switches.server import main

if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m sim.switches ASBUILT.json")
    main(Path(sys.argv[1]))
