"""Options that several commands share, declared once as a group (a frozen dataclass whose fields are
typer-annotated) and added to a command by a decorator, which hands the command one filled-in group.

    @app.command()
    @with_group("bmc", BmcOptions)
    def harvest_macs(hosts: HostsOpt = None, *, bmc: BmcOptions) -> None: ...
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")


def with_group(name: str, group: type[Any]) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Add the fields of `group` as options of the command; it receives them as `group(...)` in `name`."""
    hints = typing.get_type_hints(group, include_extras=True)
    fields = [f for f in dataclasses.fields(group) if f.init]

    def decorate(func: Callable[..., R]) -> Callable[..., R]:
        own = inspect.signature(func, eval_str=True)
        kept = [p for p in own.parameters.values() if p.name != name]
        taken = {p.name for p in kept}
        clash = [f.name for f in fields if f.name in taken]
        if clash:
            raise TypeError(f"{func.__name__}: option group {name} repeats {', '.join(clash)}")
        added = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[f.name],
                                   default=f.default) for f in fields]
        names = {f.name for f in fields}

        @functools.wraps(func)
        def command(*args: Any, **kwargs: Any) -> R:
            values = {key: kwargs.pop(key) for key in list(kwargs) if key in names}
            return func(*args, **kwargs, **{name: group(**values)})

        params = sorted([*kept, *added], key=lambda p: p.kind)
        command.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return decorate
