"""The Jinja code cache of playbooks/strategy_plugins/mitogen_linear.py: code compiled from the project's own
template text is kept on disk and renders as a fresh compile does; text from anywhere else (an inventory, a
site, a vault) never reaches the disk; backslash escaping and delimiters are part of the key; a directory that
is not safely the user's own is not used; a damaged entry is compiled again.

Each case runs in a Python of its own that imports the plugin (it installs the cache on ansible-core's
AnsibleEnvironment.compile; importing ansible-core also patches sys.intern, which torch's compiler in the same
pytest worker would trip on), with XDG_CACHE_HOME in the test's directory, and prints what it saw as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-literal-in-an-inventory-template"

SCRIPT = r'''
import importlib.util, json, os, sys
from pathlib import Path
from ansible._internal._datatag._tags import Origin
from ansible._internal._templating._engine import TemplateEngine, TemplateOptions
from ansible.template import trust_as_template

repo, case, secret = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
spec = importlib.util.spec_from_file_location("mitogen_linear_under_test",
                                              repo / "playbooks" / "strategy_plugins" / "mitogen_linear.py")
plugin = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plugin)


def text(source, origin):
    return Origin(path=str(origin), line_num=1).tag(trust_as_template(source))


def render(source, escape=False, **variables):
    return TemplateEngine(variables=variables).template(source, options=TemplateOptions(escape_backslashes=escape))


def entries():
    return sorted(p.name for p in plugin._CACHE_DIR.iterdir() if not p.name.startswith(".tmp-"))


out = {"cache_dir": str(plugin._CACHE_DIR) if plugin._CACHE_DIR else None}
if case == "project":
    source = text("{% for x in xs %}{{ x * 2 }},{% endfor %}{{ name | upper }}", repo / "roles" / "common" / "x.j2")
    out["before"] = entries()
    out["first"] = render(source, xs=[1, 2], name="gpu")
    out["after_first"] = entries()
    out["modes"] = [oct(plugin._CACHE_DIR.stat().st_mode & 0o777)] + [
        oct((plugin._CACHE_DIR / name).stat().st_mode & 0o777) for name in entries()]
    plugin._compiled.clear()  # as in a new worker: only the disk has it
    loaded = []
    load = plugin._load
    plugin._load = lambda path: loaded.append(path.name) or load(path)
    out["again"] = render(source, xs=[1, 2], name="gpu")
    out["loaded"] = loaded
    out["other_values"] = render(source, xs=[3], name="x")
    out["after"] = entries()
elif case == "outside":
    inventory = text("{{ user }}:" + secret, repo.parent / "elsewhere" / "group_vars" / "all.yml")
    out["inventory"] = render(inventory, user="root")
    out["untagged"] = render(trust_as_template("{{ user }}@" + secret), user="root")
    out["entries"] = entries()
    out["secret_on_disk"] = any(secret.encode() in p.read_bytes() for p in plugin._CACHE_DIR.rglob("*") if p.is_file())
elif case == "key":
    origin = repo / "playbooks" / "site.yml"
    out["escaped"] = render(text("{{ 'a\\nb' }}", origin), escape=True)
    out["raw"] = render(text("{{ 'a\\nb' }}", origin), escape=False)
    body = "[% 1 %] {{ 2 }}"
    out["plain"] = TemplateEngine().template(text(body, origin))
    header = "#jinja2: variable_start_string: '[%', variable_end_string: '%]'\n"
    out["overridden"] = TemplateEngine().template(text(header + body, origin))
    out["entries"] = len(entries())
elif case == "shared":
    base = Path(os.environ["XDG_CACHE_HOME"])
    out["own"] = plugin._cache_dir() is not None
    [directory] = (base / "bringup").iterdir()
    os.chmod(directory, 0o777)
    out["group_writable"] = plugin._cache_dir()
elif case == "damaged":
    source = text("{{ 6 * 7 }}", repo / "roles" / "dcgm" / "y.j2")
    out["first"] = render(source)
    [name] = entries()
    (plugin._CACHE_DIR / name).write_bytes(b"\x00not marshal")
    plugin._compiled.clear()
    out["again"] = render(source)
    out["rewritten"] = (plugin._CACHE_DIR / name).read_bytes() != b"\x00not marshal"
print(json.dumps(out))
'''


def _case(tmp_path: Path, case: str) -> dict[str, Any]:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "ANSIBLE_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(REPO), case, SECRET], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_project_templates_are_cached_on_disk_and_render_as_a_fresh_compile(tmp_path: Path) -> None:
    seen = _case(tmp_path, "project")
    assert seen["cache_dir"] and seen["cache_dir"].startswith(str(tmp_path / "cache" / "bringup"))
    assert seen["before"] == [] and len(seen["after_first"]) == 1
    assert seen["modes"][0] == "0o700" and seen["modes"][1] in ("0o600", "0o644")
    assert seen["first"] == seen["again"] == "2,4,GPU" and seen["other_values"] == "6,X"
    assert seen["loaded"] == seen["after_first"] == seen["after"]  # the second compile came from the disk


def test_text_from_outside_the_project_never_reaches_the_disk(tmp_path: Path) -> None:
    seen = _case(tmp_path, "outside")
    assert seen["inventory"] == "root:" + SECRET and seen["untagged"] == "root@" + SECRET
    assert seen["entries"] == [] and seen["secret_on_disk"] is False


def test_backslash_escaping_and_delimiters_are_part_of_the_key(tmp_path: Path) -> None:
    seen = _case(tmp_path, "key")
    assert (seen["escaped"], seen["raw"]) == ("a\\nb", "a\nb")
    assert (seen["plain"], seen["overridden"]) == ("[% 1 %] 2", "1 {{ 2 }}")  # the same text after the header
    assert seen["entries"] == 3  # the header's text loses its origin when stripped: kept in memory only


def test_a_directory_others_can_write_is_not_used(tmp_path: Path) -> None:
    seen = _case(tmp_path, "shared")
    assert seen["own"] is True and seen["group_writable"] is None


def test_a_damaged_entry_is_compiled_again(tmp_path: Path) -> None:
    seen = _case(tmp_path, "damaged")
    assert seen["first"] == seen["again"] == 42 and seen["rewritten"] is True
