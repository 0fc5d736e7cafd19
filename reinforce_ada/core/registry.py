"""A tiny name -> function registry, the one every registry of the package is an instance of.

Exit rules, selection rules, advantage baselines, policy losses, loss aggregations and allocation rules are all plain
functions registered under a name, in the style of verl's ``register_adv_est``; tasks, verifiers and generation
backends are registered factories. Configs name them with strings; code that calls them always goes through
:meth:`Registry.get`, which also accepts a user callable in place of a name.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar, overload

F = TypeVar("F", bound=Callable)


class Registry(Generic[F]):
    """Maps names to functions of one kind (``kind`` is used in error messages; an unknown name raises ``error``, a
    ``ValueError`` subclass -- a layer above the core passes its own, e.g. a ``ConfigError``)."""

    def __init__(self, kind: str, error: type[ValueError] = ValueError):
        self.kind = kind
        self.error = error
        self._fns: dict[str, F] = {}

    @overload
    def register(self, name: str) -> Callable[[F], F]: ...

    @overload
    def register(self, name: str, fn: F) -> F: ...

    def register(self, name: str, fn: F | None = None):
        """``@registry.register("name")`` above a function, or ``registry.register("name", fn)``."""

        def decorator(fn: F) -> F:
            if name in self._fns:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._fns[name] = fn
            return fn

        return decorator(fn) if fn is not None else decorator

    def get(self, name_or_fn: str | F) -> F:
        """Return the function registered as ``name_or_fn``, or ``name_or_fn`` itself when it is callable."""
        if callable(name_or_fn):
            return name_or_fn
        try:
            return self._fns[name_or_fn]
        except KeyError:
            raise self.error(
                f"unknown {self.kind} {name_or_fn!r}; registered: {', '.join(sorted(self._fns))} "
                f"(or pass a callable)"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._fns)

    def __contains__(self, name: object) -> bool:
        return name in self._fns
