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
"""

from __future__ import annotations

from typing import Any

from ansible import constants  # type: ignore[import-untyped]
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
