"""The `mitogen_linear` strategy (Mitogen for Ansible, PyPI `mitogen`), found through ansible.cfg.

Mitogen keeps one Python interpreter per target alive over the SSH connection and runs modules in it,
instead of shipping and starting a fresh AnsiballZ interpreter for every task: on many hosts and
mostly no-op tasks, the per-task cost falls by several times. `ANSIBLE_STRATEGY=linear` turns it off.

One addition: a play's `throttle` that is a template (site.yml's comes from the site's rollout) is
resolved once per batch, for the batch's first host, instead of compiled and rendered by the controller
for every host of every task (ansible-core's `_queue_task` does that: 14 s of a 105 s profiled no-op run
on 16 hosts). A play-level throttle is therefore one number for the whole batch, which is what it means;
a task's own `throttle` is left to Ansible.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleError  # type: ignore[import-untyped]
from ansible.template import Templar  # type: ignore[import-untyped]
from ansible_mitogen.plugins.strategy.mitogen_linear import (  # type: ignore[import-untyped]
    StrategyModule as _MitogenLinear,
)

__all__ = ["StrategyModule"]


class StrategyModule(_MitogenLinear):  # type: ignore[misc]
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
