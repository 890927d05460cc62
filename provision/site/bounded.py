"""Reading untrusted input files under bounds: regular files only, a size cap, YAML alias expansion capped.

Every file the controller reads from an operator (site files, `--hosts @FILE`, cabling designs, the
health overlay) goes through here, so `/dev/zero`, a FIFO, a 10 GB file or a billion-laughs YAML
document is one clear error instead of a hang, an OOM kill or a multi-gigabyte cache:

- `read_text` opens without blocking (a FIFO with no writer does not hang the open), refuses anything
  that is not a regular file, and reads at most `limit` bytes (one more to know it is too large).
- `load_yaml` composes the document (aliases stay references, so composing a billion laughs is cheap),
  counts the nodes the document expands to with every alias replaced by what it names, and refuses it
  when that count or the nesting depth is over the bound, before anything is constructed.

Callers turn `InputRefused` into their own error (SiteError, HostSelectionError, DesignError, ...).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provision.errors import BringupError

if TYPE_CHECKING:  # imported where YAML is read: the file readers serve `provision status`, which reads none
    import yaml

MiB = 1024 * 1024
# A 511-host site is 67 KB and 9k YAML nodes; a 13k-link cabling design 0.8 MB and 88k nodes.
MAX_SITE_BYTES = 16 * MiB
MAX_SITE_NODES = 1_000_000
MAX_DEPTH = 64
MAX_DESIGN_BYTES = 64 * MiB
MAX_DESIGN_NODES = 5_000_000
MAX_OVERLAY_BYTES = 4 * MiB
# A saved fabric capture (ibnetdiscover, LFT dumps, a day of UFM events: the Imbue-size LFT dump is ~110 MB)
MAX_CAPTURE_BYTES = 1024 * MiB
MAX_EVIDENCE_BYTES = 4 * MiB  # `provision record --evidence-file`
MAX_CACHE_BYTES = 256 * MiB  # a site's parsed-YAML cache (16 MiB of YAML, expanded)



class InputRefused(BringupError):
    """An input file or document over a bound (size, type, alias expansion, nesting)."""


def _describe_type(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a pipe (FIFO)"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path: Path, *, limit: int, what: str = "file") -> bytes:
    """The content of the regular file `path`, at most `limit` bytes; `InputRefused` otherwise.

    `FileNotFoundError` and other `OSError`s propagate for the caller to word; `what` names the file
    in the refusal ("site file", "hostfile")."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputRefused(f"{what} {path} is {_describe_type(mode)}: only a regular file is read")
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 * MiB, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise InputRefused(f"{what} {path} is larger than the {_size(limit)} limit")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: Path, *, limit: int, what: str = "file") -> str:
    """`read_bytes` decoded as UTF-8 with universal newlines, as `Path.read_text` reads it
    (`UnicodeDecodeError` propagates)."""
    text = read_bytes(path, limit=limit, what=what).decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB and n % MiB == 0 else f"{n} bytes"


def expanded_size(root: yaml.Node, *, max_nodes: int, max_depth: int = MAX_DEPTH) -> int:
    """How many nodes `root` stands for once every alias is expanded; `InputRefused` as soon as that is
    over `max_nodes`, the nesting (aliases expanded too) is deeper than `max_depth`, or an alias refers
    to a node that contains it.

    A node that several aliases name is sized once (memoised by identity): the walk costs the number
    of distinct nodes, whatever the expansion would be."""
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded nodes, levels)
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]  # iterative post-order: (node, children done)
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            below = [sizes[id(child)] for child in _children(node)]
            total = 1 + sum(size for size, _ in below)
            levels = 1 + max((depth for _, depth in below), default=0)
            if total > max_nodes:
                raise InputRefused(f"the document expands to more than {max_nodes} YAML nodes once its "
                                   f"aliases are expanded ({_mark(node)}: aliases of aliases, a 'billion laughs'?)")
            if levels > max_depth:
                raise InputRefused(f"the document is nested more than {max_depth} levels deep ({_mark(node)})")
            sizes[key] = (total, levels)
        elif key in on_path:
            raise InputRefused(f"an alias refers to a node that contains it ({_mark(node)})")
        elif key not in sizes:
            on_path.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return sizes[id(root)][0]


def _children(node: yaml.Node) -> list[yaml.Node]:
    # By the shape of `value` (yaml is not imported here): a scalar's is a string, a sequence's a list of
    # nodes, a mapping's a list of (key, value) node pairs.
    value = node.value
    if not isinstance(value, list):
        return []
    if value and isinstance(value[0], tuple):
        return [part for pair in value for part in pair]
    return list(value)


def _mark(node: yaml.Node) -> str:
    return f"line {node.start_mark.line + 1}"


def load_yaml(text: str, *, max_nodes: int = MAX_SITE_NODES, max_depth: int = MAX_DEPTH) -> Any:
    """`yaml.safe_load(text)` (libyaml when present) that refuses a document over the bounds before
    constructing it. `yaml.YAMLError` propagates for the caller to word, `InputRefused` for a bound."""
    import yaml

    safe_loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = safe_loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_size(node, max_nodes=max_nodes, max_depth=max_depth)
        return loader.construct_document(node)
    finally:
        loader.dispose()
