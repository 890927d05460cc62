"""A path the docs, a docstring or a comment name is one that exists: a newcomer follows these to find the code,
and a rename that leaves them behind sends them nowhere.

- README.md, ARCHITECTURE.md, docs/*.md, roles/README.md and roles/*/README.md, training/*.md, tools/*.md and
  every README.md under sim/: every backticked repository path (a file or a folder, whose first part is something
  the repository holds at its top; in a role's README also the role's own `defaults/`, `tasks/`, ...) exists; a folder written with its trailing slash is a folder; a glob matches;
  `{a,b}` is each of its spellings; before a placeholder (`<site>`, `…`) its folder exists. Code blocks are
  commands and example files, not mentions.
- Those docs and the product's code: every module path (`provision/…/x.py`), backticked or not, exists.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("provision", "fabric", "report", "sim", "tools", "training")
MENTION = re.compile(r"(?<![\w./-])((?:" + "|".join(PACKAGES) + r")/[\w/]*\w\.py)\b")
TICKED = re.compile(r"`([^`\n]+)`")
FENCED = re.compile(r"^\s*```.*?^\s*```", re.M | re.S)
ROLE_PARTS = ("defaults", "files", "filter_plugins", "handlers", "library", "lookup_plugins", "meta", "tasks",
              "templates", "vars")
PLACEHOLDER = re.compile(r"<[^>]*>|…|\.\.\.")
SITE_BLOCK = re.compile(r"^<!-- (?P<tag>site-example|companion): (?P<path>\S+) -->\n```\w*\n(?P<body>.*?)^```$",
                        re.M | re.S)
BRACES = re.compile(r"\{([^{}]*,[^{}]*)\}")


def _tops() -> set[str]:
    """What the repository holds at its top (tracked files and folders): a mention starting there is a path."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True, check=True,
                            timeout=60).stdout
    return {line.split("/", 1)[0] for line in listed.splitlines()}


def _documents() -> list[Path]:
    return [REPO / "README.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").glob("*.md")),
            REPO / "roles" / "README.md", *sorted((REPO / "roles").glob("*/README.md")),
            *sorted((REPO / "training").glob("*.md")), *sorted((REPO / "tools").glob("*.md")),
            *sorted((REPO / "sim").rglob("README.md"))]


def site_files(text: str) -> set[str]:
    """What a doc's example site file names (its string values) and the companion files it shows (docs/real-site.md:
    `<!-- site-example: F -->`, `<!-- companion: F -->` above a code block): paths beside that site file, not in
    the repository, whatever their first part (its cabling design is `fabric/design.yml`)."""
    found: set[str] = set()
    for match in SITE_BLOCK.finditer(text):
        if match["tag"] == "companion":
            found.add(match["path"])
            continue
        todo = [yaml.safe_load(match["body"])]
        while todo:
            item = todo.pop()
            if isinstance(item, str):
                found.add(item)
            elif isinstance(item, dict | list):
                todo.extend(item.values() if isinstance(item, dict) else item)
    return found


def mentions(text: str, tops: set[str], role: bool) -> Iterator[tuple[int, str]]:
    """(line, path as written) of every backticked path of `text` outside code blocks that names a repository
    path, or with `role`, a part of the role whose README this is; not the files of the doc's example site."""
    beside = site_files(text)
    prose = FENCED.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for no, line in enumerate(prose.splitlines(), 1):
        for ticked in TICKED.finditer(line):
            for word in ticked.group(1).split():
                word = word.strip("\"',;()[]")
                word = re.sub(r"(::\S*|:\d+(-\d+)?)$", "", word.removeprefix("./"))
                if ("/" not in word and word not in tops) or any(c in word for c in "$=:") or word.startswith("/"):
                    continue
                first = word.split("/", 1)[0]
                if (first in tops or (role and first in ROLE_PARTS)) and word not in beside:
                    yield no, word


def _spellings(path: str) -> list[str]:
    """`a/{b,c}/d` as `a/b/d` and `a/c/d`."""
    match = BRACES.search(path)
    if match is None:
        return [path]
    return [spelling for choice in match.group(1).split(",")
            for spelling in _spellings(path[:match.start()] + choice + path[match.end():])]


def missing(path: str, base: Path) -> bool:
    """Whether `path` (as written, relative to `base`) names nothing there."""
    for spelling in _spellings(path):
        if (cut := PLACEHOLDER.search(spelling)) is not None:
            if not (base / spelling[:cut.start()].rsplit("/", 1)[0]).is_dir():
                return True
        elif any(c in spelling for c in "*?["):
            if next(itertools.islice(base.glob(spelling), 1), None) is None:
                return True
        elif not ((base / spelling).is_dir() if spelling.endswith("/") else (base / spelling).exists()):
            return True
    return False


def test_every_path_a_doc_names_exists() -> None:
    tops = _tops()
    gone = []
    for doc in _documents():
        role = doc.parent.parent == REPO / "roles"
        for no, path in mentions(doc.read_text(encoding="utf-8"), tops, role):
            base = doc.parent if role and path.split("/", 1)[0] in ROLE_PARTS else REPO
            if missing(path, base):
                gone.append(f"{doc.relative_to(REPO)}:{no}: {path}")
    assert not gone, "these name paths that do not exist:\n" + "\n".join(gone)


def test_the_doc_check_finds_a_missing_file_folder_glob_and_placeholder_folder() -> None:
    text = ("See `provision/errors.py`, `fabric/ports/`, `roles/munge` and `deps/python/*.txt`; run\n"
            "`./bringup test` or `python3 provision/no_such.py --x`. Not paths: `a/b` (no top), `$X/fabric/y`,\n"
            "`BRINGUP_SITE=fabric/x`, `/etc/fabric/x`. Gone: `fabric/gone/`, `deps/none/*.txt`,\n"
            "`roles/<role>/x`, `fabric/none/<x>.py`, `fabric/{ports,nothere}/`, `provision/x.py:12`.\n"
            "```sh\nls `fabric/in_a_code_block.py`\n```\nIn a role: `defaults/main.yml`. The site's `fabric/d.yml`:\n"
            "<!-- site-example: site.yml -->\n```yaml\nfabric: {design: fabric/d.yml}\n```\n")
    found = list(mentions(text, {"provision", "fabric", "roles", "deps", "bringup"}, role=True))
    assert [p for _, p in found] == [
        "provision/errors.py", "fabric/ports/", "roles/munge", "deps/python/*.txt", "bringup",
        "provision/no_such.py", "fabric/gone/", "deps/none/*.txt", "roles/<role>/x", "fabric/none/<x>.py",
        "fabric/{ports,nothere}/", "provision/x.py", "defaults/main.yml"]
    assert found[-1][0] == 8, "a code block's lines still count"
    assert [p for _, p in found if missing(p, REPO)] == [
        "provision/no_such.py", "fabric/gone/", "deps/none/*.txt", "fabric/none/<x>.py", "fabric/{ports,nothere}/",
        "provision/x.py", "defaults/main.yml"]
    assert not missing("defaults/main.yml", REPO / "roles" / "munge")


def test_every_module_path_named_in_the_code_and_the_docs_exists() -> None:
    code = sorted(p for top in PACKAGES for p in (REPO / top).rglob("*.py"))
    gone = [f"{doc.relative_to(REPO)}:{no}: {m.group(1)}"
            for doc in [*_documents(), *code]
            for no, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
            for m in MENTION.finditer(line) if not (REPO / m.group(1)).is_file()]
    assert not gone, "these name files that do not exist:\n" + "\n".join(gone)
