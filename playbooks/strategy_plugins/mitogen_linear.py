"""The `mitogen_linear` strategy (Mitogen for Ansible, PyPI `mitogen`), found through ansible.cfg.

Mitogen keeps one Python interpreter per target alive over the SSH connection and runs modules in it,
instead of shipping and starting a fresh AnsiballZ interpreter for every task: on many hosts and
mostly no-op tasks, the per-task cost falls by several times. `ANSIBLE_STRATEGY=linear` turns it off.
"""

from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule

__all__ = ["StrategyModule"]
