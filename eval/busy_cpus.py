"""Other processes busy on the machine, for benchmarks that must hold under load (issue 31:
"measure it with two CPU-bound processes beside it").

`busy_processes(n)` starts `n` child processes that each spin one CPU, and stops every one it
started when the block ends, however it ends (an error, an interrupt): each is terminated, then
killed if it has not exited within a second, and waited for, so none outlives the benchmark.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

# A loop that holds one CPU and nothing else (no memory, no I/O).
_SPIN = "while True: pass"


@dataclass
class Busy:
    """What ran beside the measurement, for its report."""

    processes: int
    pids: list[int] = field(default_factory=list)
    load_average_at_start: list[float] = field(default_factory=list)
    load_average_at_end: list[float] = field(default_factory=list)

    def report(self) -> dict[str, object]:
        return {
            "cpu_bound_processes": self.processes,
            "load_average_at_start": self.load_average_at_start,
            "load_average_at_end": self.load_average_at_end,
        }


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@contextlib.contextmanager
def busy_processes(n: int) -> Iterator[Busy]:
    """`n` CPU-bound child processes for the duration of the block (none when n is 0)."""
    busy = Busy(n, load_average_at_start=_load())
    children: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(n):
            # Our own interpreter and a constant program: no outside input reaches the command.
            children.append(subprocess.Popen([sys.executable, "-c", _SPIN], stdin=subprocess.DEVNULL))  # noqa: S603
            busy.pids.append(children[-1].pid)
        yield busy
    finally:
        busy.load_average_at_end = _load()
        for child in children:
            child.terminate()
        for child in children:
            try:
                child.wait(timeout=1)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
