"""With ``--json``, a command's standard output holds the JSON alone.

A reward function that prints (``DEBUG scoring 16 completions``), a library that logs to standard output, or a verifier
worker process that writes to it would otherwise end up in the middle of ``eval --json``'s JSON, and a program
reading it gets no valid JSON. While a ``--json`` command runs (:func:`json_only_stdout`, entered by the command line
for every command given ``--json``) everything written to standard output -- ``print``, and writes to file descriptor
1 by a C library or a worker process started meanwhile -- goes to standard error; the command hands its JSON to
:func:`print_result`, which writes it to the real standard output once the command is done.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator

__all__ = ["json_only_stdout", "print_result"]

_held: list[str] | None = None
"""The results a running ``--json`` command handed over, printed when it ends; ``None`` when none is running."""


def print_result(text: str) -> None:
    """Print a command's result (its JSON): at once, or, while :func:`json_only_stdout` holds standard output, when the
    command is done."""
    if _held is None:
        print(text)
    else:
        _held.append(text)


@contextlib.contextmanager
def json_only_stdout(active: bool = True) -> Iterator[None]:
    """Standard output sent to standard error while the block runs (``active``), then the results the block handed to
    :func:`print_result` written to it; inactive, nothing changes."""
    global _held
    if not active or _held is not None:
        yield
        return
    stdout = sys.stdout
    stdout.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no file descriptor 1 to move (an embedding host): print() is still sent to standard error
        saved = None
    _held = []
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)
        results, _held = _held, None
        for text in results:
            print(text, file=stdout)
        stdout.flush()
