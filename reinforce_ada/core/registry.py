"""A tiny name -> function registry.

Exit rules, selection rules, advantage baselines, loss aggregations and allocation rules are all plain functions
registered under a name, in the style of verl's ``register_adv_est``. Configs name them with strings; code that calls
them always goes through :meth:`Registry.get`, which also accepts a user callable in place of a name.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

F = TypeVar("F", bound=Callable)


class Registry(Generic[F]):
    """Maps names to functions of one kind (``kind`` is used in error messages)."""

    def __init__(self, kind: str):
        self.kind = kind
        self._fns: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        def decorator(fn: F) -> F:
            if name in self._fns:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._fns[name] = fn
            return fn

        return decorator

    def get(self, name_or_fn: str | F) -> F:
        """Return the function registered as ``name_or_fn``, or ``name_or_fn`` itself when it is callable."""
        if callable(name_or_fn):
            return name_or_fn
        try:
            return self._fns[name_or_fn]
        except KeyError:
            raise ValueError(
                f"unknown {self.kind} {name_or_fn!r}; registered: {', '.join(sorted(self._fns))} "
                f"(or pass a callable)"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._fns)

    def __contains__(self, name: object) -> bool:
        return name in self._fns
