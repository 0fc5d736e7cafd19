"""One writer per run folder: :class:`RunLock` holds an exclusive ``fcntl.flock`` on the folder itself for the run's
life; a second process is refused with the holder's PID. The lock is on the folder, not on a file in it, so no file
can be deleted to get past it: a second writer must open the same folder to write into it."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from reinforce_ada.errors import RunFolderError
from reinforce_ada.runs.folder import run_entries


class RunLock:
    """An exclusive ``fcntl.flock`` on ``folder`` (its directory), held while a run uses the folder (released by
    :meth:`release` or when the process ends, however it ends). A folder another process (or another trainer of
    this one) holds is refused with the holder's PID; taking it writes nothing into the folder."""

    def __init__(self, folder: Path):
        import fcntl

        if folder.exists() and not folder.is_dir():
            raise RunFolderError(f"output_dir {folder} is a file, not a folder")
        self.folder = folder
        self.created_folders = [p for p in (folder, *folder.parents) if not p.exists()]  # it and parents made for it
        folder.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(self._fd)
            self._fd = None
            if err.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            raise RunFolderError(f"{folder} is in use by another training run ({lock_holder(folder)} holds it); wait "
                                 f"for it to finish or choose another --output-dir") from None

    def release(self, remove_if_unused: bool = False) -> None:
        """Unlock; with ``remove_if_unused`` (a failed start) the folder (and the parents made for it) goes when this
        lock created it and nothing is in it."""
        if self._fd is None:
            return
        if remove_if_unused and not run_entries(self.folder):
            for made in self.created_folders:  # innermost first; each only while empty
                if any(made.iterdir()):
                    break
                made.rmdir()
        os.close(self._fd)  # closing the folder releases the flock
        self._fd = None


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
