"""The `mitogen_linear` strategy (Mitogen for Ansible, PyPI `mitogen`), found through ansible.cfg.

Mitogen keeps one Python interpreter per target alive over the SSH connection and runs modules in it,
instead of shipping and starting a fresh AnsiballZ interpreter for every task: on many hosts and
mostly no-op tasks, the per-task cost falls by several times. `ANSIBLE_STRATEGY=linear` turns it off.

One addition: a play's `throttle` that is a template (site.yml's comes from the site's rollout) is
resolved once per batch, for the batch's first host, instead of compiled and rendered by the controller
for every host of every task (ansible-core's `_queue_task` does that: 14 s of a 105 s profiled no-op run
on 16 hosts). A play-level throttle is therefore one number for the whole batch, which is what it means;
a task's own `throttle` is left to Ansible.

Two: a task whose `when` is false for a host is skipped by the controller, without forking a worker to
find that out (ansible-core forks one per host and task, ~24 ms of the controller's single busy core
each, and the worker then evaluates the same `when` against the same variables: nearly half of a no-op
site.yml's host-tasks are skips; measured, a skip over 16 hosts fell from ~0.9 s to ~0.45 s, the rest being
the controller's get_vars, which the `when` needs either way). The result goes through the results queue
as the worker's would, so callbacks, `register`, stats and handlers see the same skipped result. Left to
the worker: loops (`when` is per item), delegation and `run_once` (other variables), a `when` naming a
connection variable the worker adds (ansible-core's MAGIC_VARIABLE_MAPPING), and any `when` that raises
(the worker reports it).

Three: the Jinja code compiled from the roles' and playbooks' own templates is kept, in memory and in a
per-user cache directory, keyed by the template text and every setting that changes the code. ansible-core
compiles a template string afresh each time it renders it, in the controller and in every worker (forked
per host and task, so nothing compiled there outlives the task): on a no-op site.yml over 16 test hosts on
two cores, compiling was a fifth of the controller's CPU (the code is the same for every host). Only text
read from files under this repository's roles/ and playbooks/ is cached on disk (its origin says so),
never the inventory's, the site's or a vault's; the directory is the user's own, mode 0700, or nothing is
written (Jinja's FileSystemBytecodeCache takes the same precautions).
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import stat
import tempfile
import types
from pathlib import Path
from typing import Any

import ansible  # type: ignore[import-untyped]
import jinja2
from ansible import constants  # type: ignore[import-untyped]
from ansible._internal._datatag._tags import Origin  # type: ignore[import-untyped]
from ansible._internal._templating import _jinja_bits  # type: ignore[import-untyped]
from ansible._internal._templating._engine import TemplateEngine  # type: ignore[import-untyped]
from ansible.errors import AnsibleError  # type: ignore[import-untyped]
from ansible.executor.task_result import _RawTaskResult  # type: ignore[import-untyped]
from ansible.template import Templar  # type: ignore[import-untyped]
from ansible_mitogen.plugins.strategy.mitogen_linear import (  # type: ignore[import-untyped]
    StrategyModule as _MitogenLinear,
)

__all__ = ["StrategyModule"]

# The variables a worker adds to a task's variables from the connection settings before it evaluates `when`.
_WORKER_VARIABLES = frozenset(name for names in constants.MAGIC_VARIABLE_MAPPING.values() for name in names)


def _skipped_on_controller(task: Any, task_vars: dict[str, Any]) -> dict[str, Any] | None:
    """The worker's result for `task` when its `when` is false for these variables, else None (queue it)."""
    conditions = task.when
    if not conditions or task.loop or task.loop_with or task.delegate_to or task.run_once:
        return None
    if any(isinstance(c, str) and any(name in c for name in _WORKER_VARIABLES) for c in conditions):
        return None
    context: dict[str, Any] = {}
    try:
        if task._resolve_conditional(conditions, task_vars, result_context=context):
            return None
    except Exception:
        return None
    # TaskExecutor._execute_internal's skipped result; _queue_task adds _ansible_no_log as the worker does.
    return {"changed": False, "skipped": True, "skip_reason": "Conditional result was False", **context}


_PROJECT_FILES = tuple(str(Path(__file__).resolve().parents[2] / d) + os.sep for d in ("roles", "playbooks"))
_COMPILE = _jinja_bits.AnsibleEnvironment.compile
_compiled: dict[tuple[Any, ...], types.CodeType] = {}


def _cache_dir() -> Path | None:
    """The user's own template-code directory (created 0700), or None when it is not safely ours."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    tag = f"py{importlib.util.MAGIC_NUMBER.hex()}-jinja{jinja2.__version__}-core{ansible.__version__}"
    path = base / "bringup" / f"ansible-templates-{tag}"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.lstat()
    except OSError:
        return None
    mine = stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
    return path if mine and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) else None


_CACHE_DIR = _cache_dir()


def _key(env: Any, source: str, name: Any, filename: Any, defer_init: bool) -> tuple[Any, ...]:
    """What decides the code: the text, the lexer's and code generator's settings, backslash escaping."""
    context = _jinja_bits._TemplateCompileContext.current(optional=True)
    return (str.__str__(source), name, filename, defer_init, context.escape_backslashes if context else None,
            type(env).__qualname__, env.block_start_string, env.block_end_string, env.variable_start_string,
            env.variable_end_string, env.comment_start_string, env.comment_end_string, env.line_statement_prefix,
            env.line_comment_prefix, env.trim_blocks, env.lstrip_blocks, env.newline_sequence,
            env.keep_trailing_newline, env.optimized, env.is_async, env.finalize is not None,
            repr(env.autoescape), tuple(sorted(env.extensions)))


def _load(path: Path) -> types.CodeType | None:
    try:
        code = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return code if isinstance(code, types.CodeType) else None


def _store(path: Path, code: types.CodeType) -> None:
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as out:
            out.write(marshal.dumps(code))
        os.replace(tmp, path)  # whole or not at all: workers of the same run may write the same entry
    except OSError:
        pass


def _compile(self: Any, source: Any, name: Any = None, filename: Any = None, raw: bool = False,
             defer_init: bool = False) -> Any:
    if raw or not isinstance(source, str) or self._debuggable_template_source:
        return _COMPILE(self, source, name, filename, raw, defer_init)
    key = _key(self, source, name, filename, defer_init)
    if (code := _compiled.get(key)) is not None:
        return code
    origin = str(getattr(Origin.get_tag(source), "path", None) or "")
    path = None
    if _CACHE_DIR is not None and origin.startswith(_PROJECT_FILES):
        path = _CACHE_DIR / hashlib.sha256(repr(key).encode()).hexdigest()
    code = _load(path) if path else None
    if code is None:
        code = _COMPILE(self, source, name, filename, raw, defer_init)
        if path:
            _store(path, code)
    _compiled[key] = code
    return code


_jinja_bits.AnsibleEnvironment.compile = _compile


class StrategyModule(_MitogenLinear):  # type: ignore[misc]
    def _queue_task(self, host: Any, task: Any, task_vars: dict[str, Any], play_context: Any) -> Any:
        result = _skipped_on_controller(task, task_vars)
        if result is None:
            return super()._queue_task(host, task, task_vars, play_context)
        task.update_result_no_log(TemplateEngine(loader=self._loader, variables=task_vars), result)
        # What ansible-core's _queue_task and WorkerProcess._run do around the worker, in the same order.
        self._queued_task_cache[(host.name, task._uuid)] = {
            "host": host, "task": task, "task_vars": task_vars, "play_context": play_context}
        self._tqm.send_callback("v2_runner_on_start", host, task)
        self._final_q.send_task_result(_RawTaskResult(host=host, task=task, return_data=result,
                                                      task_fields=task.dump_attrs()))
        self._pending_results += 1
        return None

    def run(self, iterator: Any, play_context: Any) -> Any:
        play = iterator._play
        # ansible-core's linear run() sets the same cache again first thing; get_hosts_left needs it now.
        self._set_hosts_cache(play)
        hosts = self.get_hosts_left(iterator)
        if isinstance(play.throttle, str) and hosts:
            variables = self._variable_manager.get_vars(play=play, host=hosts[0], _hosts=self._hosts_cache,
                                                        _hosts_all=self._hosts_cache_all)
            try:
                throttle = int(Templar(loader=self._loader, variables=variables).template(play.throttle))
            except Exception as exc:
                raise AnsibleError(f"the play's throttle {play.throttle!r} is not an integer: {exc}") from exc
            # The play's own tasks and blocks inherit from the Play object they were loaded with, which is
            # not the copy the iterator runs (imported roles' tasks read the copy): set both.
            for target in {id(p): p for p in [play, *(b._play for b in iterator._blocks if b._play)]}.values():
                target.throttle = throttle
        return super().run(iterator, play_context)
