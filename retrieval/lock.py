"""One opener per embedded index directory, with a holder a human can find.

Qdrant Edge refuses a second opener with a bare `WouldBlock` from its WAL. We take our own
lock first, an exclusive flock on `LOCK` in the index directory, and write who holds it (pid,
host, program, since when), so a second opener, in this process or another, gets IndexLocked
naming the holder. flock is released by the kernel when the holder exits, even on a crash, so a
stale file never blocks anyone; we never delete the file (that would race a concurrent opener).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
from datetime import UTC, datetime
from pathlib import Path

from .errors import IndexLocked, IndexUnavailable, LockHolder


class IndexLock:
    def __init__(self, directory: Path) -> None:
        self.path = directory / "LOCK"
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise IndexLocked (held elsewhere) / IndexUnavailable (cannot open)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise IndexUnavailable("index lock", f"cannot open {self.path}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise IndexLocked(str(self.path.parent), holder) from None
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "opened_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "program": " ".join(sys.argv[:2]) or "python",
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the descriptor drops the flock


def _read_holder(fd: int) -> LockHolder | None:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode() or "null")
        return LockHolder(
            pid=int(data["pid"]),
            host=str(data["host"]),
            opened_at=str(data["opened_at"]),
            program=str(data["program"]),
        )
    except (OSError, ValueError, TypeError, KeyError):
        return None
