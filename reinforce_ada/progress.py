"""The command line's progress bars: on a terminal only, and drawn on every terminal.

A bar (tqdm) is shown only when the stream it writes to is a terminal (``disable=None``), so a piped log holds no
carriage-return redraws. Its width follows the terminal's; a pseudo-terminal that reports no size (``script`` run
where there is no terminal, some container and CI sessions: 0 columns and 0 rows) would make tqdm draw nothing -- a
bar 0 wide, and every bar counted below a screen of 0 rows is hidden --, so it gets ``COLUMNS`` and ``LINES``, or
80 x 24, instead (:func:`shutil.get_terminal_size`'s fallback).
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

__all__ = ["progress_bar"]


def progress_bar(**kwargs: Any) -> Any:
    """A tqdm bar (``total``, ``desc``, ``unit``, ``initial``, ... as tqdm takes them) on ``stderr``, shown on a
    terminal only (``disable=True``: never), as wide as the terminal -- or, where the terminal reports no size,
    ``COLUMNS`` x ``LINES`` or 80 x 24."""
    from tqdm.auto import tqdm

    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # not a terminal (the bar is off then) or no file descriptor
        size = os.terminal_size((0, 0))
    if size.columns and size.lines:
        sizing: dict[str, Any] = {"dynamic_ncols": True}
    else:  # tqdm would draw 0 columns, and hide a bar below a screen of 0 rows
        fallback = shutil.get_terminal_size()
        sizing = {"ncols": fallback.columns, "nrows": fallback.lines}
    return tqdm(**{"file": sys.stderr, "disable": None, **sizing, **kwargs})
