"""Code that runs in *other* processes for the concurrency, crash and migration tests.

Two ways in:

- multiprocessing ('spawn' context) targets: `archive_rounds`, `record_rounds`, `open_and_record`.
  Each opens its own `Archive` (its own engine and connections, as a separate service would),
  waits at a barrier so that the contenders really start together, and puts one report on a
  queue: ("ok", payload) or ("crash", traceback text).
- a command line for the crash test, where the test SIGKILLs the process:
  `python _workers.py crash-writer URL SESSION JOURNAL SEED SELF_KILL_BATCH`.

The loops themselves (`run_archive_rounds`, `run_record_rounds`) take an open `Archive`, so the
thread tests run exactly the same code against one shared `Archive`.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from sqlalchemy import event

from mnemo_sea.archive import Archive, ArchiveConflict, Principal, Role, Sensitivity

TENANT = "clinic-a"
AGENT = Principal(TENANT, "agent-1", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
ADMIN = Principal(TENANT, "admin-1", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)

BARRIER_TIMEOUT_S = 60.0
CRASH_BATCH = 20

# An outcome of one archive attempt, plain data so it crosses process boundaries:
#   ("ok", batch_id, archived ids)  |  ("conflict", ((id, status), ...))  |  ("error", repr)
Outcome = tuple[Any, ...]


class BarrierLike(Protocol):
    def wait(self, timeout: float | None = None) -> int: ...

    def abort(self) -> None: ...


class QueueLike(Protocol):
    def put(self, item: Any) -> None: ...


def attempt_archive(archive: Archive, session_id: str, targets: Sequence[tuple[str, str]]) -> Outcome:
    try:
        receipt = archive.archive_results(AGENT, session_id, list(targets))
    except ArchiveConflict as e:
        return ("conflict", tuple((t.result_id, t.status) for t in e.targets))
    except Exception as e:  # anything else is a wrong answer the test must see, not a crash
        return ("error", f"{type(e).__name__}: {e}")
    return ("ok", receipt.batch_id, receipt.archived)


def run_archive_rounds(
    archive: Archive, session_id: str, rounds: Sequence[Sequence[tuple[str, str]]], barrier: BarrierLike
) -> list[Outcome]:
    """For each round: wait for every contender, then try to archive that round's batch."""
    outcomes: list[Outcome] = []
    for targets in rounds:
        barrier.wait(BARRIER_TIMEOUT_S)
        outcomes.append(attempt_archive(archive, session_id, targets))
    return outcomes


def run_record_rounds(
    archive: Archive, worker: int, rounds: Sequence[tuple[str, int]], barrier: BarrierLike
) -> list[tuple[str, str, str, str]]:
    """For each (session, count) round: wait for every contender, then record `count` results.

    Returns (session_id, result_id, content, sha256 the archive reported) per recorded result.
    """
    out: list[tuple[str, str, str, str]] = []
    for round_no, (session_id, count) in enumerate(rounds):
        barrier.wait(BARRIER_TIMEOUT_S)
        for i in range(count):
            content = f"worker {worker} round {round_no} item {i}: {'x' * (i * 37 % 500)}"
            result = archive.record(AGENT, session_id, "inventory.check", content, arguments={"w": worker})
            out.append((session_id, result.result_id, content, result.content_sha256))
    return out


def _report(queue: QueueLike, worker: int, barrier: BarrierLike, body: Callable[[], Any]) -> None:
    try:
        queue.put((worker, "ok", body()))
    except BaseException:
        barrier.abort()  # the other contenders stop waiting for this one and report too
        queue.put((worker, "crash", traceback.format_exc()))


def archive_rounds(
    url: str,
    worker: int,
    session_id: str,
    rounds: Sequence[Sequence[tuple[str, str]]],
    barrier: BarrierLike,
    queue: QueueLike,
) -> None:
    def body() -> list[Outcome]:
        archive = Archive.open(url)
        try:
            return run_archive_rounds(archive, session_id, rounds, barrier)
        finally:
            archive.close()

    _report(queue, worker, barrier, body)


def record_rounds(
    url: str, worker: int, rounds: Sequence[tuple[str, int]], barrier: BarrierLike, queue: QueueLike
) -> None:
    def body() -> list[tuple[str, str, str, str]]:
        archive = Archive.open(url)
        try:
            return run_record_rounds(archive, worker, rounds, barrier)
        finally:
            archive.close()

    _report(queue, worker, barrier, body)


def open_and_record(urls: Sequence[str], worker: int, barrier: BarrierLike, queue: QueueLike) -> None:
    """For each URL: together with the other processes, open (and so migrate) a store nobody
    has opened yet, and record one result into a session of this worker's own."""

    def body() -> list[str]:
        ids = []
        for url in urls:
            barrier.wait(BARRIER_TIMEOUT_S)
            archive = Archive.open(url)
            try:
                ids.append(archive.record(AGENT, f"opener-{worker}", "t", f"opened by {worker}").result_id)
            finally:
                archive.close()
        return ids

    _report(queue, worker, barrier, body)


# ---- the crash writer ------------------------------------------------------------------------


def crash_writer(url: str, session_id: str, journal_path: str, seed: int, self_kill_batch: int) -> None:
    """Archive batches of CRASH_BATCH live results for ever, recording more when they run out.

    Before each archive call it appends {"event": "send", "key", "targets"} to the journal and
    after it {"event": "done", "key"}; every batch uses its key as idempotency key, so the test
    can tie each committed batch to what was sent. With self_kill_batch >= 1, the batch of that
    number (counting from 0 in this run), or the next if that one ran fewer statements than the
    point drawn, SIGKILLs its own process at a random point inside the archive transaction
    (before a random statement, or just before COMMIT), after journalling
    {"event": "self_kill", "key", "statement"}. Batch 0 of each run counts the statements.
    The test SIGKILLs the process from outside otherwise; it never ends on its own.
    """
    rng = random.Random(seed)
    journal = open(journal_path, "a", encoding="utf-8")  # noqa: SIM115 - lives until the kill

    def note(entry: dict[str, Any]) -> None:
        journal.write(json.dumps(entry) + "\n")
        journal.flush()  # in the kernel now: survives SIGKILL of this process

    archive = Archive.open(url)
    state: dict[str, Any] = {"armed": False, "counting": False, "seen": 0, "kill_at": -1, "key": ""}

    def die(where: str) -> None:
        note({"event": "self_kill", "key": state["key"], "statement": state["seen"], "where": where})
        os.kill(os.getpid(), signal.SIGKILL)

    def before_execute(_c: Any, _cur: Any, statement: str, *_args: Any) -> None:
        if state["counting"] or state["armed"]:
            state["seen"] += 1
        if state["armed"] and state["seen"] == state["kill_at"]:
            die(statement.strip().split("\n")[0][:80])

    def before_commit(_conn: Any) -> None:
        if state["armed"] and state["kill_at"] == 0:
            die("COMMIT")

    event.listen(archive.store.engine, "before_cursor_execute", before_execute)
    event.listen(archive.store.engine, "commit", before_commit)

    print("ready", flush=True)
    statements_per_archive = 0
    next_kill_at: int | None = None
    batch_no = 0
    recorded = 0
    while True:
        live = [r.result_id for r in archive.list_results(AGENT, session_id) if r.state == "live"]
        if len(live) < CRASH_BATCH:
            for _ in range(CRASH_BATCH):
                size = rng.randint(2_000, 40_000)
                content: str | bytes = rng.randbytes(size)
                if rng.random() < 0.5:  # text too: non-ASCII and markup that must not close an envelope
                    content = (
                        f"seed {seed} #{recorded} 价格 </context_result> " + rng.randbytes(size // 2).hex()
                    )
                archive.record(AGENT, session_id, "logs.search", content, arguments={"seed": seed})
                recorded += 1
            continue
        targets = live[:CRASH_BATCH]
        key = f"crash-{seed}-{batch_no}"
        note({"event": "send", "key": key, "targets": targets})
        state.update(key=key, seen=0, counting=batch_no == 0)
        if batch_no == self_kill_batch and statements_per_archive > 0:
            # 1..n: before that statement; 0: all statements ran, die just before COMMIT.
            state.update(armed=True, kill_at=rng.randint(0, statements_per_archive))
        elif next_kill_at is not None:
            state.update(armed=True, kill_at=next_kill_at)
        archive.archive_results(
            AGENT, session_id, [(r, f"note {r} of {key}") for r in targets], idempotency_key=key
        )
        if batch_no == 0:
            statements_per_archive = state["seen"]
        # Still alive while armed: archive calls do not all run the same number of statements
        # (14-16 seen on SQLite), so the kill point, drawn from the first call's count, may lie
        # past the end of this one. Draw again from this call's count for the next call (the
        # results recorded in between run disarmed): the run still dies inside an archive
        # transaction, at a random statement.
        next_kill_at = rng.randint(0, state["seen"]) if state["armed"] else None
        state.update(armed=False, counting=False)
        note({"event": "done", "key": key})
        batch_no += 1


def main(argv: Sequence[str]) -> int:
    if len(argv) == 6 and argv[0] == "crash-writer":
        crash_writer(argv[1], argv[2], argv[3], int(argv[4]), int(argv[5]))
        return 0
    print(f"usage: {sys.argv[0]} crash-writer URL SESSION JOURNAL SEED SELF_KILL_BATCH", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
