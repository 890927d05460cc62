"""docs/real-site.md, the runbook for a real site, against the code it describes.

- every `provision ...`, `fabric ...` and `python -m training ...` line of its shell blocks names a command that
  exists (its `--help` runs, in-process through the CLI's own `main`) and only options that command's help lists;
- its example site file loads through `provision.site.load_site`, beside the companion files it names (the cabling
  design made by the doc's own `fabric design import` line from the doc's sheet, placeholders for the rest);
- its generated failure-reason table is what `provision steps --json` prints today, and every failure reason its
  prose names (`failed(reason)`) is in the step table;
- every site-file field it names (`ssh.known_hosts`, `racks[].hosts[].bmc.address`, `firmware:`) is a field of the
  site model (provision/site/model.py).

`python -m tests.foundation.test_real_site_doc --write` regenerates the failure-reason table in the doc.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import types
import typing
from dataclasses import dataclass
from fnmatch import fnmatch
from functools import cache
from pathlib import Path
from typing import Any

import click
import pytest
import typer
import yaml
from pydantic import BaseModel

from tests.cli_run import run_cli

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "real-site.md"
BEGIN = "<!-- BEGIN failure-reasons: generated from `provision steps --json`, do not edit by hand -->"
END = "<!-- END failure-reasons -->"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
FENCE = re.compile(r"^(?:<!-- (?P<tag>site-example|companion): (?P<path>\S+) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)^```$",
                   re.M | re.S)
PROGRAMS = ("provision", "fabric", "python -m training")


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    tag: str | None
    path: str | None


def blocks(text: str) -> list[Block]:
    return [Block(m["lang"], m["body"], m["tag"], m["path"]) for m in FENCE.finditer(text)]


def command_lines(text: str) -> list[list[str]]:
    """The words of every project command in the doc's shell blocks, up to a redirection, pipe or `--`."""
    found = []
    for block in blocks(text):
        if block.lang != "sh":
            continue
        for line in block.body.splitlines():
            words = shlex.split(line, comments=True)
            cut = next((i for i, w in enumerate(words) if w in {">", ">>", "|", "&&", "--"}), len(words))
            words = words[:cut]
            if words[:1] in (["provision"], ["fabric"]) or words[:3] == ["python", "-m", "training"]:
                found.append(words)
    return found


def _run(main: Any, argv: list[str]) -> tuple[int, str]:
    done = run_cli(main, argv)
    return done.code, ANSI.sub("", done.stdout)


@cache
def _click_app(program: str) -> click.Command:
    """The command tree the CLI's `main` builds (built once: typer builds it anew on every call)."""
    if program == "provision":
        from provision.cli import app, load_commands

        load_commands([])
        return typer.main.get_command(app)
    from fabric.cli import app as fabric_app

    return typer.main.get_command(fabric_app)


def _main(program: str) -> Any:
    if program == "provision":
        from provision.cli import main as provision_main

        return provision_main
    if program == "fabric":
        from fabric.cli import main as fabric_main

        return fabric_main
    from training.cli import main as training_main

    return training_main


def split_command(words: list[str]) -> tuple[str, list[str], list[str]]:
    """(program, the command path under it, the options used) of one command line."""
    program = "python -m training" if words[0] == "python" else words[0]
    rest = words[3:] if program == "python -m training" else words[1:]
    if program == "python -m training":
        path = rest[:1]
    else:
        group = _click_app(program)
        path = []
        for word in rest:
            if not isinstance(group, click.Group) or word not in group.commands:
                break
            path.append(word)
            group = group.commands[word]
    options = [w.split("=", 1)[0] for w in rest[len(path):] if w.startswith("-")]
    return program, path, options


def _click_command(program: str, path: list[str]) -> click.Command:
    command = _click_app(program)
    for word in path:
        assert isinstance(command, click.Group), f"{program} {' '.join(path)}: {word!r} under a command, not a group"
        command = command.commands[word]
    return command


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


@pytest.mark.parametrize("program", PROGRAMS)
def test_every_command_line_of_the_runbook_uses_only_options_its_help_lists(doc: str, program: str,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m training`'s case takes ~2 s of CPU (5-10 s wall on the shared 2 cores): `launch` imports torch."""
    monkeypatch.setenv("COLUMNS", "250")  # rich's help: no option name cut short
    monkeypatch.setenv("TERMINAL_WIDTH", "250")
    commands = [words for words in command_lines(doc) if split_command(words)[0] == program]
    assert len(commands) >= 4, f"no `{program}` line found in the runbook's shell blocks"
    helps: dict[tuple[str, ...], str] = {}
    problems = []
    for words in commands:
        _, path, options = split_command(words)
        line = " ".join(words)
        if program != "python -m training" and isinstance(_click_command(program, path), click.Group):
            problems.append(f"{line}: `{program} {' '.join(path)}` is a group, not a command")
            continue
        key = (program, *path)
        if key not in helps:
            code, text = _run(_main(program), [*path, "--help"])
            if code != 0:
                problems.append(f"{line}: `{program} {' '.join(path)} --help` exited {code}")
                continue
            helps[key] = text
        known: set[str] = set()
        if program != "python -m training":
            for param in _click_command(program, path).params:
                known.update(getattr(param, "opts", []), getattr(param, "secondary_opts", []))
        for option in options:
            if option not in helps[key] or (known and option not in known):
                problems.append(f"{line}: {option} is not an option of `{program} {' '.join(path)}`")
    assert not problems, "\n".join(problems)


def test_the_example_site_file_loads_beside_the_companion_files_it_names(doc: str, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from fabric.cli import main as fabric_main
    from provision.site import load_site

    monkeypatch.delenv("ANSIBLE_VAULT_PASSWORD_FILE", raising=False)  # the vault is a placeholder: never opened
    monkeypatch.chdir(tmp_path)
    examples = [b for b in blocks(doc) if b.tag == "site-example"]
    assert len(examples) == 1
    site_file = tmp_path / str(examples[0].path)
    site_file.write_text(examples[0].body, encoding="utf-8")
    for block in blocks(doc):
        if block.tag == "companion":
            (tmp_path / str(block.path)).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / str(block.path)).write_text(block.body, encoding="utf-8")
    for words in command_lines(doc):  # the design, as the doc makes it from the partner's sheet
        if words[:3] in (["fabric", "design", "import"], ["fabric", "design", "check"]):
            code, out = _run(fabric_main, words[1:])
            assert code == 0, f"{' '.join(words)}: exit {code}\n{out}"

    data = yaml.safe_load(examples[0].body)
    named = [data["maas"]["ca_bundle"], data["bmc_tls"]["ca_bundle"], data["ssh"]["key_file"],
             data["ssh"]["known_hosts"], *{c["password"]["vault"] for c in data["credentials"].values()
                                          if "vault" in c["password"]}]
    for name in named:
        assert f"`{name}`" in doc, f"the runbook does not say what {name} is"
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("placeholder\n", encoding="utf-8")
    assert (tmp_path / data["fabric"]["design"]).is_file(), "the doc's import did not write the site's design"

    site = load_site(site_file)
    assert site.name == data["name"]
    assert sorted(h.hostname for r in site.spec.racks for h in r.hosts) == [
        "ctl-01", "gpu-r1-01", "gpu-r1-02", "gpu-r2-01"]


def step_table() -> list[dict[str, Any]]:
    from provision.cli import main as provision_main

    code, out = _run(provision_main, ["steps", "--json"])
    assert code == 0, out
    rows: list[dict[str, Any]] = json.loads(out)
    return rows


def failure_table(rows: list[dict[str, Any]]) -> str:
    """The doc's table: one line per reason and remediation, with the steps that give it."""
    by_reason: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        for reason, todo in row["reasons"].items():
            by_reason.setdefault((reason, todo), []).append(row["step"])
    lines = ["| reason | given by | what to do |", "|---|---|---|"]
    for (reason, todo), steps in by_reason.items():
        cell = " ".join(todo.split()).replace("|", "\\|")
        lines.append(f"| `{reason}` | {', '.join(steps)} | {cell} |")
    return "\n".join(lines)


def _generated(text: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip("\n")


def test_the_failure_reason_table_is_the_step_tables_today(doc: str) -> None:
    assert _generated(doc) == failure_table(step_table()), (
        "regenerate it: .venv/bin/python -m tests.foundation.test_real_site_doc --write")


def _prose(text: str) -> str:
    """The doc as written by hand: without its generated table (which the test above compares) and code blocks."""
    start, end = text.index(BEGIN), text.index(END)
    return FENCE.sub("", text[:start] + text[end:])


def test_every_failure_reason_the_runbooks_prose_names_is_in_the_step_table(doc: str) -> None:
    known = [reason for row in step_table() for reason in row["reasons"]]
    named = set(re.findall(r"failed\(([a-z0-9_]+)\)", _prose(doc)))
    assert {"ib_port_disabled", "firmware_drift", "bios_drift", "burnin_link_failed"} <= named
    unknown = sorted(r for r in named if not any(r == k or fnmatch(r, k) for k in known))
    assert not unknown, f"reasons the step table does not have: {unknown}"


def _inside(annotation: Any) -> list[Any]:
    """The types a field's annotation holds: an Optional's or a Union's, a list's items; a dict stays a dict."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, list, tuple, set, frozenset):
        return [t for arg in typing.get_args(annotation) for t in _inside(arg)]
    return [annotation]


def _models() -> list[type[BaseModel]]:
    """The site model's classes, SiteSpec first, and every model a field of one holds."""
    from provision.site.model import SiteSpec

    found: list[type[BaseModel]] = []
    todo: list[Any] = [SiteSpec]
    while todo:
        t = todo.pop(0)
        if typing.get_origin(t) is dict:
            todo.extend(_inside(typing.get_args(t)[1]))
        elif isinstance(t, type) and issubclass(t, BaseModel) and t not in found:
            found.append(t)
            todo.extend(a for info in t.model_fields.values() for a in _inside(info.annotation))
    return found


def is_site_field(path: str) -> bool:
    """Whether `path` (`ssh.key_file`, `racks[].hosts[].bmc.address`; a dict's key is any one part) is a field of
    the site model (provision/site/model.py SiteSpec, by name or by the alias a site file spells)."""
    current: list[Any] = [_models()[0]]
    for part in path.replace("[]", "").split("."):
        reached: list[Any] = []
        for t in current:
            if typing.get_origin(t) is dict:
                reached.extend(_inside(typing.get_args(t)[1]))
            elif isinstance(t, type) and issubclass(t, BaseModel):
                reached.extend(a for name, info in t.model_fields.items() if part in (name, info.alias)
                               for a in _inside(info.annotation))
        if not reached:
            return False
        current = reached
    return True


def site_fields_named(text: str) -> tuple[list[str], list[str]]:
    """(dotted field paths whose first part is a top-level site key, `key:`s) the text names in backticks."""
    tops = set(_models()[0].model_fields)
    words = re.findall(r"`([a-z_]+(?:\[\])?(?:\.[a-z_]+(?:\[\])?)+|[a-z_]+:)`", text)
    paths = [w for w in words if not w.endswith(":") and w.replace("[]", "").split(".")[0] in tops]
    return paths, [w.removesuffix(":") for w in words if w.endswith(":")]


def unknown_site_fields(text: str) -> list[str]:
    paths, keys = site_fields_named(text)
    fields = {name for model in _models() for name, info in model.model_fields.items()
              for name in (name, info.alias) if name}
    return sorted({p for p in paths if not is_site_field(p)} | {f"{k}:" for k in keys if k not in fields})


def test_every_site_file_field_the_runbook_names_is_in_the_site_model(doc: str) -> None:
    """The runbook tells an operator which site-file key holds each thing (`ssh.known_hosts`, `maas.url`,
    `racks[].hosts[].bmc.address`, a host class's `firmware:`): each is a field of provision/site/model.py's
    SiteSpec, by its path from the top, or for `key:` of some model below it."""
    paths, keys = site_fields_named(_prose(doc))
    assert len(paths) >= 10 and len(keys) >= 3, (paths, keys)
    assert not unknown_site_fields(_prose(doc)), "the site model has no such field"


def test_a_site_field_the_model_does_not_have_is_found() -> None:
    text = ("`ssh.known_hosts`, `racks[].hosts[].bmc.address`, `slurm:`, `firmware:`, `credentials.bmc.username`; "
            "wrong: `ssh.knownhosts`, `racks[].bmc.address`, `policy.golden_requires_burnin`, `nosuch:`; not a "
            "field path: `secrets.yml`, `provision.site`")
    assert unknown_site_fields(text) == ["nosuch:", "policy.golden_requires_burnin", "racks[].bmc.address",
                                         "ssh.knownhosts"]


def test_every_page_the_readme_points_to_exists() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    pages = set(re.findall(r"`([\w./-]+\.md)`", readme))
    assert {"docs/real-site.md", "docs/performance.md", "ARCHITECTURE.md"} <= pages
    assert not sorted(p for p in pages if not (REPO / p).is_file())


def write() -> None:
    text = DOC.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    DOC.write_text(text[:start] + "\n" + failure_table(step_table()) + "\n" + text[end:], encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.foundation.test_real_site_doc --write")
    write()
