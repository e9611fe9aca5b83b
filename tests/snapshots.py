"""A read snapshot of a SQLite archive held by another process, sequenced through pipes.

`SnapshotReader(db)` starts a process (plain `sqlite3`, as any other program reading the file
would) that opens the file, begins a transaction and reads a table, so it holds a snapshot of
the write-ahead log; it answers `held` once it does. `release()` ends its transaction (the
connection stays open, so SQLite's own checkpoint at the last close never runs) and returns once
it answered `released`; `close()` ends the process. No sleeps: every step waits for the other
side's line.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from types import TracebackType


class SnapshotReader:
    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self._expect("held")

    def _expect(self, word: str) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line == word, f"the reader said {line!r}, not {word!r}"

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("release\n")
        self.proc.stdin.flush()
        self._expect("released")

    def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)

    def __enter__(self) -> SnapshotReader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _hold(db: str) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM evidence").fetchone()  # the snapshot starts at this read
    print("held", flush=True)
    if sys.stdin.readline().strip() == "release":
        conn.execute("COMMIT")
        print("released", flush=True)
        sys.stdin.read()  # until the test closes the pipe; the connection stays open meanwhile
    conn.close()


if __name__ == "__main__":
    _hold(sys.argv[1])
