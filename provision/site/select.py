"""Which hosts a command acts on: `--hosts` patterns over the site's host names.

A pattern is a comma-separated list of items; each item is a shell glob (`gpu-r1-*`), a Slurm-style
range (`gpu-r1-[01-04,07]`), `rack:NAME`, or `@FILE` (a hostfile: one host per line, as `provision
golden` writes it in any format but torchrun). No pattern means every GPU host for the commands that run
on GPU hosts (health, bisect) and every host for those that act on servers (BMC power, PXE, MAAS).
An empty pattern is an error, never "all": `--hosts "$UNSET"` must not power off a site.

Every input is bounded: a hostfile must be a regular file of at most `MAX_HOSTFILE_BYTES`, and one
`--hosts` (ranges and hostfiles together) names at most `MAX_HOST_NAMES` hosts, so `[0-99999999]` or
`@/dev/zero` is a clear error, not minutes of work or an OOM kill.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

from provision.errors import HostSelectionError
from provision.site.bounded import InputRefused, MiB, read_text
from provision.site.model import Host, Role, Site

_RANGE = re.compile(r"^(?P<prefix>[^\[\]]*)\[(?P<spans>[0-9,\-]+)\](?P<suffix>[^\[\]]*)$")
_SPAN = re.compile(r"^\d{1,12}(-\d{1,12})?$")
_GLOB = re.compile(r"[*?\[]")

# The largest clusters are tens of thousands of hosts; one selection naming more is a typo.
MAX_HOST_NAMES = 100_000
MAX_HOSTFILE_BYTES = 16 * MiB
# A range whose names are globs is matched name by name against every host: bound that work too.
MAX_GLOB_NAMES = 1_000


class _Budget:
    """How many more host names one `--hosts` may still name (ranges and hostfiles together)."""

    def __init__(self, limit: int = MAX_HOST_NAMES) -> None:
        self.left = limit
        self.limit = limit

    def take(self, count: int, what: str) -> None:
        if count > self.left:
            raise HostSelectionError(f"--hosts {what}: names more than {self.limit} hosts; select fewer "
                                     f"(a rack:NAME or a glob names a whole rack without listing it)")
        self.left -= count


def expand_ranges(item: str, budget: _Budget | None = None) -> list[str]:
    """`gpu-[01-03,07]` → gpu-01, gpu-02, gpu-03, gpu-07 (zero padding kept); other items unchanged.
    At most `MAX_HOST_NAMES` names (all the ranges of one `--hosts` together when `budget` is shared)."""
    match = _RANGE.match(item)
    if match is None:
        return [item]
    budget = budget or _Budget()
    names: list[str] = []
    for span in match["spans"].split(","):
        if not _SPAN.match(span):
            raise HostSelectionError(f"--hosts {item!r}: {span[:40]!r} is not N or N-M (at most 12 digits)")
        first, _, last = span.partition("-")
        width = len(first)
        stop = int(last) if last else int(first)
        if stop < int(first):
            raise HostSelectionError(f"--hosts {item!r}: range {span} runs backwards")
        budget.take(stop - int(first) + 1, repr(item[:80]))
        names.extend(f"{match['prefix']}{n:0{width}d}{match['suffix']}" for n in range(int(first), stop + 1))
    if len(names) > MAX_GLOB_NAMES and _GLOB.search(match["prefix"] + match["suffix"]):
        raise HostSelectionError(f"--hosts {item[:80]!r}: a range of globs may name at most {MAX_GLOB_NAMES} "
                                 f"patterns (it names {len(names)})")
    return names


def _split_items(pattern: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    items, depth, current = [], 0, ""
    for char in pattern:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += char
    items.append(current.strip())
    return [item for item in items if item]


def _hostfile(path: Path, budget: _Budget) -> list[str]:
    try:
        lines = read_text(path, limit=MAX_HOSTFILE_BYTES, what="hostfile").splitlines()
    except InputRefused as exc:
        raise HostSelectionError(f"--hosts @{path}: {exc}") from None
    except UnicodeDecodeError:
        raise HostSelectionError(f"--hosts @{path}: not a text file (not UTF-8)") from None
    except OSError as exc:
        raise HostSelectionError(f"--hosts @{path}: cannot read ({exc.strerror or exc})") from None
    # One host per line as `provision golden` writes it (plain, deepspeed `host slots=N`), or the slurm
    # format's one line of compressed ranges (`gpu-r1-[01-03],gpu-r2-07`).
    names: list[str] = []
    for line in lines:
        if line.strip() and not line.lstrip().startswith("#"):
            for item in _split_items(line.split()[0]):
                if _RANGE.match(item) is None:  # a range takes its share as it expands
                    budget.take(1, f"@{path}")
                names.extend(expand_ranges(item, budget))
    return names


def select_hosts(site: Site, pattern: str | None, *, everyone: bool = False) -> list[Host]:
    """The site's hosts that `pattern` names, in site order; every item must name at least one host.
    Without a pattern: every GPU host, or every host when `everyone`."""
    hosts = site.hosts()
    if pattern is None:
        return hosts if everyone else [h for h in hosts if h.role is Role.gpu]
    items = _split_items(pattern)
    if not items:
        raise HostSelectionError(f"--hosts {pattern!r} names no host (leave the option out to mean "
                                 f"{'every host' if everyone else 'every GPU host'})")
    chosen: set[str] = set()
    names = {h.hostname for h in hosts}
    budget = _Budget()
    for item in items:
        if item.startswith("@"):
            listed = _hostfile(Path(item[1:]), budget)
            unknown = [name for name in listed if name not in names]
            if unknown:
                raise HostSelectionError(f"--hosts {item}: not in the site: {', '.join(unknown[:5])}")
            matched = set(listed)
        elif item.startswith("rack:"):
            matched = {h.hostname for h in hosts if h.rack == item[5:]}
        else:
            matched = set()
            for name in expand_ranges(item, budget):
                if _GLOB.search(name):
                    matched |= set(fnmatch.filter(names, name))
                elif name in names:  # a plain name: no glob matching against every host
                    matched.add(name)
        if not matched:
            raise HostSelectionError(f"--hosts: {item!r} matches no host of site {site.name}")
        chosen |= matched
    return [h for h in hosts if h.hostname in chosen]
