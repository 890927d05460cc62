"""The Jinja code cache of playbooks/strategy_plugins/mitogen_linear.py: code compiled from the project's own
template text is kept on disk and renders as a fresh compile does; text from anywhere else (an inventory, a
site, a vault) never reaches the disk; backslash escaping and delimiters are part of the key; a directory that
is not safely the user's own is not used; a damaged entry is compiled again.

The plugin is imported in this process (it installs the cache on AnsibleEnvironment.compile); the fixture puts
ansible-core's compile back afterwards.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from ansible._internal._datatag._tags import Origin
from ansible._internal._templating import _jinja_bits
from ansible._internal._templating._engine import TemplateEngine, TemplateOptions
from ansible.template import trust_as_template

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "playbooks" / "strategy_plugins" / "mitogen_linear.py"
SECRET = "s3cr3t-literal-in-an-inventory-template"


@pytest.fixture()
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    original = _jinja_bits.AnsibleEnvironment.compile
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    spec = importlib.util.spec_from_file_location("bringup_mitogen_linear_under_test", PLUGIN)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        _jinja_bits.AnsibleEnvironment.compile = original


def _text(text: str, origin: Path) -> str:
    return Origin(path=str(origin), line_num=1).tag(trust_as_template(text))  # type: ignore[no-any-return]


def _render(text: str, **variables: object) -> object:
    return TemplateEngine(variables=variables).template(text, options=TemplateOptions(escape_backslashes=False))


def _entries(module: ModuleType) -> list[Path]:
    return sorted(p for p in module._CACHE_DIR.iterdir() if not p.name.startswith(".tmp-"))


def test_project_templates_are_cached_on_disk_and_render_as_a_fresh_compile(plugin: ModuleType) -> None:
    text = _text("{% for x in xs %}{{ x * 2 }},{% endfor %}{{ name | upper }}", REPO / "roles" / "common" / "x.j2")
    assert plugin._CACHE_DIR is not None and _entries(plugin) == []
    first = _render(text, xs=[1, 2], name="gpu")
    [entry] = _entries(plugin)
    assert entry.stat().st_mode & 0o777 in (0o600, 0o644) and plugin._CACHE_DIR.stat().st_mode & 0o777 == 0o700
    plugin._compiled.clear()  # a new worker: only the disk has it
    again = _render(text, xs=[1, 2], name="gpu")
    assert first == again == "2,4,GPU"
    assert _entries(plugin) == [entry]
    assert _render(text, xs=[3], name="x") == "6,X"


def test_text_from_outside_the_project_never_reaches_the_disk(plugin: ModuleType, tmp_path: Path) -> None:
    inventory = _text("{{ user }}:" + SECRET, tmp_path / "inventory" / "group_vars" / "all.yml")
    assert _render(inventory, user="root") == "root:" + SECRET
    assert _entries(plugin) == []
    untagged = trust_as_template("{{ user }}:" + SECRET)
    assert _render(untagged, user="root") == "root:" + SECRET
    assert _entries(plugin) == []
    assert all(SECRET.encode() not in p.read_bytes() for p in plugin._CACHE_DIR.rglob("*") if p.is_file())


def test_backslash_escaping_and_delimiters_are_part_of_the_key(plugin: ModuleType) -> None:
    origin = REPO / "playbooks" / "site.yml"
    text = "{{ 'a\\nb' }}"
    escaped = TemplateEngine().template(_text(text, origin), options=TemplateOptions(escape_backslashes=True))
    raw = TemplateEngine().template(_text(text, origin), options=TemplateOptions(escape_backslashes=False))
    assert (escaped, raw) == ("a\\nb", "a\nb")
    body = "[% 1 %] {{ 2 }}"
    assert TemplateEngine().template(_text(body, origin)) == "[% 1 %] 2"
    header = "#jinja2: variable_start_string: '[%', variable_end_string: '%]'\n"
    assert TemplateEngine().template(_text(header + body, origin)) == "1 {{ 2 }}"  # the same text after the header
    assert len(_entries(plugin)) == 3  # the header's text loses its origin when stripped: memory only


def test_a_directory_others_can_write_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  plugin: ModuleType) -> None:
    shared = tmp_path / "shared"
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    assert plugin._cache_dir() is not None
    [directory] = (shared / "bringup").iterdir()
    os.chmod(directory, 0o777)
    assert plugin._cache_dir() is None


def test_a_damaged_entry_is_compiled_again(plugin: ModuleType) -> None:
    text = _text("{{ 6 * 7 }}", REPO / "roles" / "dcgm" / "y.j2")
    assert _render(text) == 42
    [entry] = _entries(plugin)
    entry.write_bytes(b"\x00not marshal")
    plugin._compiled.clear()
    assert _render(text) == 42
    assert entry.read_bytes() != b"\x00not marshal"
