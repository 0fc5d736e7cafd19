"""One writer per run folder: :class:`RunLock` holds an exclusive ``fcntl.flock`` on ``.lock`` in the folder for
the run's life; a second process is refused with the holder's PID."""

from __future__ import annotations

import errno
from pathlib import Path

from reinforce_ada.errors import RunFolderError
from reinforce_ada.runs.folder import run_entries

LOCK = ".lock"
"""The run folder's lock file (see :class:`RunLock`); never deleted, so that its lock is always on one file."""


class RunLock:
    """An exclusive ``fcntl.flock`` on ``folder/.lock``, held while a run uses the folder (released by
    :meth:`release` or when the process ends, however it ends). A folder another process (or another trainer of
    this one) holds is refused with the holder's PID; nothing is written into the lock file, so taking it changes
    no file of a run."""

    def __init__(self, folder: Path):
        import fcntl

        if folder.exists() and not folder.is_dir():
            raise RunFolderError(f"output_dir {folder} is a file, not a folder")
        self.folder = folder
        self.created_folders = [p for p in (folder, *folder.parents) if not p.exists()]  # it and parents made for it
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / LOCK
        self.created_lock = not path.exists()
        self._fh = path.open("a")
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            self._fh.close()
            if err.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            holder = lock_holder(path)
            raise RunFolderError(f"{folder} is in use by another training run ({holder} holds {path}); wait for it to "
                                 f"finish or choose another --output-dir") from None

    def release(self, remove_if_unused: bool = False) -> None:
        """Unlock; with ``remove_if_unused`` (a failed start) the lock file this lock created goes when the folder
        holds no run, and the folder (and the parents made for it) too when this lock created it and nothing else is in
        it."""
        if self._fh.closed:
            return
        if remove_if_unused and self.created_lock and not run_entries(self.folder):
            (self.folder / LOCK).unlink(missing_ok=True)
            for made in self.created_folders:  # innermost first; each only while empty
                if any(made.iterdir()):
                    break
                made.rmdir()
        self._fh.close()  # closing the file releases the flock


def lock_holder(path: Path) -> str:
    """``process PID`` for the process holding a flock on ``path`` (from ``/proc/locks``, Linux), else ``another
    process``."""
    try:
        inode = path.stat().st_ino
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(inode):
                return f"process {fields[4]}"
    except OSError:
        pass
    return "another process"
