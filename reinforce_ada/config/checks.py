"""The one type check every config runs first, the choice check, and the field docstrings (command-line help).

``check_field_types`` compares each value with its field's annotation (``config field `max_steps`: expected int, got
list [1, 2]``); every config class's ``__post_init__`` calls it before its range and cross-field rules."""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import math
import numbers
import re
import types
import typing
from dataclasses import fields
from typing import Any

from reinforce_ada.errors import ConfigError

__all__ = ["check_field_types", "expand_home", "field_docs", "field_sections", "first_sentence", "terminal_text"]


@functools.lru_cache(maxsize=None)
def _field_types(cls: type) -> dict[str, Any]:
    """Each field's annotation, resolved (every config annotation names something this module imports)."""
    return typing.get_type_hints(cls)


def _accepts(annotation: Any, value: Any) -> bool:
    """Whether ``value`` is of the annotated type (bool is not an int; an int is a float; NaN and inf are not)."""
    origin = typing.get_origin(annotation)
    if annotation is Any:
        return True
    if dataclasses.is_dataclass(annotation):  # a nested section: the section itself or a mapping of its fields
        return isinstance(value, (annotation, dict))
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(member, value) for member in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if annotation is float:
        return (isinstance(value, numbers.Real) and not isinstance(value, bool)
                and math.isfinite(value))  # type: ignore[arg-type]
    if annotation is str:
        return isinstance(value, str)
    if annotation is collections.abc.Callable or origin is collections.abc.Callable:
        return callable(value)
    if origin is tuple:
        args = typing.get_args(annotation)
        if not isinstance(value, (tuple, list)):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_accepts(args[0], v) for v in value)
        return len(value) == len(args) and all(_accepts(a, v) for a, v in zip(args, value))
    return True  # an annotation this check does not know: left to __post_init__


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(member) for member in typing.get_args(annotation))
    if annotation is type(None):
        return "None"
    if dataclasses.is_dataclass(annotation):
        return f"a mapping of {annotation.__name__} fields"
    if annotation is float:
        return "a finite float"
    if annotation is collections.abc.Callable or origin is collections.abc.Callable:
        return "a callable"
    return getattr(annotation, "__name__", str(annotation))


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_field_types(cls: type, values: dict[str, Any], source: str | None = None, prefix: str = "") -> None:
    """Raise :class:`ConfigError` for the first value in ``values`` that is not of its field's annotated type.

    The message names the field, the type expected and the value got, e.g. ``config field `max_steps`: expected
    int, got list [1, 2]``; ``source`` (a file name) is put in front when given. Fields unknown to ``cls`` are left
    to the caller. ``prefix`` is put in front of the field's name (``sampler.`` for a nested section).
    """
    hints = _field_types(cls)
    for name, value in values.items():
        if name in hints and not _accepts(hints[name], value):
            where = f"{source}: " if source else ""
            raise ConfigError(f"{where}config field `{prefix}{name}`: expected {_type_name(hints[name])}, "
                              f"got {type(value).__name__} {_shown(value)}")


def _check_types(config: Any, prefix: str = "") -> None:
    check_field_types(type(config), {f.name: getattr(config, f.name) for f in fields(config)}, prefix=prefix)


def unknown_fields(keys: list[Any], known: list[str], prefix: str = "") -> str:
    """The unknown keys, each with the closest known name: ```foo` (did you mean `for`?)``."""
    import difflib

    hints = []
    for key in keys:
        close = difflib.get_close_matches(str(key), known, n=1)
        hints.append(f"`{prefix}{key}`" + (f" (did you mean `{prefix}{close[0]}`?)" if close else ""))
    return ", ".join(hints)


def _check_choice(field_name: str, value: Any, choices: list[str], *, callable_ok: bool = False) -> None:
    """A ConfigError naming the field, the choices and the closest one, unless ``value`` is one of ``choices`` (or,
    with ``callable_ok``, a callable: a field a Python caller may give its own rule; the message says so only there,
    as a command line cannot give one)."""
    if (callable_ok and callable(value)) or value in choices:
        return
    import difflib

    close = difflib.get_close_matches(str(value), [str(choice) for choice in choices], n=1)
    raise ConfigError(f"{field_name}={value!r} is not one of {', '.join(map(str, choices))}"
                      + (" (or, from Python, a callable)" if callable_ok else "")
                      + (f"; did you mean {close[0]!r}?" if close else ""))


def expand_home(config: Any, names: tuple[str, ...]) -> None:
    """Each of ``names`` that is a path starting with ``~`` gets the home folder put in, as a shell would: a YAML file
    or ``--output-dir=~/run`` is read by no shell, and ``~`` would otherwise be a folder of that name."""
    import os

    for name in names:
        value = getattr(config, name)
        if isinstance(value, str) and value.startswith("~"):
            setattr(config, name, os.path.expanduser(value))


SEED_MAX = 2**32 - 1
"""The largest seed every generator the run seeds takes (``np.random.seed`` refuses 2**32 and negatives)."""


def check_seeds(config: Any, names: tuple[str, ...], prefix: str = "") -> None:
    """A ConfigError naming the first of ``names`` that is not an integer in 0..2**32-1."""
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= SEED_MAX:
            raise ConfigError(f"{prefix}{name} must be an integer in 0..{SEED_MAX} (2**32-1) (got {value!r})")


def check_positive_ints(config: Any, names: tuple[str, ...]) -> None:
    """A ConfigError naming the first of ``names`` that is not a positive integer."""
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{name} must be a positive integer (got {value!r})")


_ROLE = re.compile(r":[a-z]+:`(~?)([^`<]+?)(?:\s*<[^>]+>)?`")
_LINK = re.compile(r"`([^`<]+?)\s*<([^>]+)>`_+")
_LITERAL = re.compile(r"``(.+?)``")


def terminal_text(text: str) -> str:
    """reST as a terminal shows it: double-backquoted literals lose their quotes, a role such as ``:class:`` keeps
    its target (only the last part after a ``~``), a link keeps its text with the address in brackets; everything
    else stays as written.

    >>> terminal_text("``tiny`` or :data:`~reinforce_ada.config.STRATEGIES`; see `TRL <https://x.y>`_")
    'tiny or STRATEGIES; see TRL (https://x.y)'
    """
    text = _ROLE.sub(lambda m: m.group(2).rpartition(".")[2] if m.group(1) else m.group(2), text)
    text = _LINK.sub(lambda m: f"{m.group(1)} ({m.group(2)})", text)
    return _LITERAL.sub(lambda m: m.group(1), text)


@functools.lru_cache(maxsize=None)
def field_docs(cls: type) -> dict[str, str]:
    """The docstring written under each dataclass field, as a terminal shows it (:func:`terminal_text`): the
    command-line help, and TRL's field help."""
    import ast
    import inspect
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
            docs[node.target.id] = terminal_text(" ".join(nxt.value.value.split()))
    return docs


@functools.lru_cache(maxsize=None)
def field_sections(cls: type) -> dict[str, str]:
    """Each field of a dataclass by the section its class body declares it under -- the ``# -- title ---`` comment
    above it (the title up to a parenthesis) -- the groups of the command line's help; a field before any such comment
    is in no section (absent)."""
    import inspect
    import textwrap

    sections: dict[str, str] = {}
    title = None
    for line in textwrap.dedent(inspect.getsource(cls)).splitlines():
        heading = re.match(r"\s+# -- (.+?) -{3,}$", line)
        if heading:
            title = heading.group(1).split(" (")[0].strip()
            continue
        declared = re.match(r"    (\w+): ", line)
        if declared and title is not None and declared.group(1) in cls.__dataclass_fields__:
            sections[declared.group(1)] = title
    return sections


def first_sentence(text: str) -> str:
    """The first sentence of ``text``: up to the first ``.``, ``?`` or ``!`` outside brackets that is followed by a
    space (not in ``e.g.`` or ``i.e.``); the whole text when it has one sentence.

    >>> first_sentence("Passes over each step's completions (e.g. 2). More after.")
    "Passes over each step's completions (e.g. 2)."
    """
    depth = 0
    for i, char in enumerate(text):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(char, 0)
        if (char in ".?!" and depth <= 0 and text[i + 1:i + 2] == " "
                and not text[max(0, i - 4):i + 1].endswith(("e.g.", "i.e.", "vs."))):
            return text[:i + 1]
    return text
