"""The writer the composition crash test kills, and the journal both sides read.

`python _crash_worker.py serve` starts a *fork server*: it imports mnemo-sea once (the import
costs seconds; the test needs more than a hundred writers), prints "ready", then reads commands
from stdin, one JSON object a line:

- {"op": "run", "data": DIR, "journal": PATH, "run": N, "seed": S, "kill": POINT, "at": K}
  forks a writer and prints "pid PID"; the writer prints "opened PID" once its store is open
  and then works until it is killed (it never ends on its own);
- {"op": "reap", "pid": PID} waits for that writer (killed by now) and prints "status PID CODE"
  (CODE as `os.waitstatus_to_exitcode`: -9 for SIGKILL). A writer is reaped only when the test
  says so, so its pid cannot be reused while the test may still signal it.

A writer opens the data folder like `Mnemo.open` (SQLite archive + Qdrant Edge index), but with
`sync_writes=False`: it calls `sync()` itself after each write, so that it can die between the
SQL commit and the index apply. Kill points (POINT, K):

- "none": the test SIGKILLs it from outside;
- "after_commit": right after the K-th write of this run committed (and was journalled as
  acknowledged), before `sync()`;
- "index_op": inside `sync()`, just before the K-th index operation (upsert, delete, status
  change or flush): some outbox rows applied to the index, none marked done;
- "after_flush": inside `sync()`, right after the K-th index flush returned, before the outbox
  rows are marked done.

The journal (JSON lines, appended with one `write` each, so each line survives SIGKILL whole or
not at all): {"ev": "begin", "op": ...} before each operation, {"ev": "ack", ...} after it
returned. A begin without its ack is in flight: it may or may not have committed, and what it
touched is "tainted" (never used again, and checked by the test only for all-or-nothing).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import sys
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

TENANT = "crashco"
WORDS = (
    "delivery",
    "policy",
    "order",
    "refund",
    "parcel",
    "courier",
    "customs",
    "invoice",
    "warehouse",
    "stock",
    "vaccine",
    "dosage",
    "clinic",
    "shipment",
    "tracking",
    "border",
)


def token(prefix: str, *numbers: int) -> str:
    """A letters-only word unique to (prefix, numbers): the tokenizer keeps it whole."""
    out = []
    for number in numbers:
        digits, rest = "", number
        while True:
            rest, d = divmod(rest, 26)
            digits += chr(ord("a") + d)
            if rest == 0:
                break
        out.append(digits)
    return prefix + "q".join(out)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def receipt_to_json(receipt: Any) -> dict[str, Any]:
    data = asdict(receipt)
    data["deleted_at"] = receipt.deleted_at.isoformat()
    return data


def receipt_from_json(data: dict[str, Any]) -> Any:
    from mnemo_sea.archive import DeletionReceipt

    return DeletionReceipt(
        tenant_id=data["tenant_id"],
        target=data["target"],
        deleted_at=datetime.fromisoformat(data["deleted_at"]),
        evidence_versions=tuple((e, int(v)) for e, v in data["evidence_versions"]),
        tool_results=tuple(data["tool_results"]),
        sessions=tuple(data["sessions"]),
        memory_facts=tuple((o, k, int(v)) for o, k, v in data["memory_facts"]),
        summaries=tuple(data["summaries"]),
        task_states=tuple((x, int(v)) for x, v in data.get("task_states", ())),
        blobs=tuple(data["blobs"]),
        content_sha256=tuple(data["content_sha256"]),
        outbox_ids=tuple(data["outbox_ids"]),
        audit_seq=int(data["audit_seq"]),
        counts=dict(data["counts"]),
        audit_hash=data["audit_hash"],
        key_id=data["key_id"],
        signature=data["signature"],
    )


# ---- the journal, as both the writer and the test read it --------------------------------------


@dataclass
class Model:
    """What the journal says the store must hold (acknowledged) and what is in doubt (in flight)."""

    # evidence id -> version -> {"sha", "body", "seq"} (acknowledged versions)
    evidence: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    deleted_evidence: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> receipt
    maybe_deleted_evidence: set[str] = field(default_factory=set)
    tainted_evidence: set[str] = field(default_factory=set)
    # "session/rid" -> {"sha", "content" (hex), "seq"}; archived ones also have "note"
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    archived: set[str] = field(default_factory=set)
    tainted_results: set[str] = field(default_factory=set)
    sessions: set[str] = field(default_factory=set)
    deleted_sessions: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> receipt
    maybe_deleted_sessions: set[str] = field(default_factory=set)
    acked: Counter[str] = field(default_factory=Counter)
    in_flight: Counter[str] = field(default_factory=Counter)
    recover_mismatches: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    self_kills: list[dict[str, Any]] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)
    bad_lines: int = 0
    seq: int = 0  # number of acknowledged operations so far

    # -- what a writer may still use
    def live_evidence(self) -> list[str]:
        return sorted(
            e for e in self.evidence if e not in self.deleted_evidence and e not in self.tainted_evidence
        )

    def usable_sessions(self) -> list[str]:
        return sorted(
            s
            for s in self.sessions
            if s not in self.deleted_sessions and s not in self.maybe_deleted_sessions
        )

    def recoverable(self) -> list[str]:
        usable = set(self.usable_sessions())
        return sorted(r for r in self.archived - self.tainted_results if self.session_of(r) in usable)

    @staticmethod
    def session_of(ref: str) -> str:
        return ref.rpartition("/")[0]

    # -- journal replay
    def _ack(self, begin: dict[str, Any], ack: dict[str, Any]) -> None:
        op = begin["op"]
        self.seq += 1
        self.acked[op] += 1
        if op == "ingest":
            for item in ack["items"]:
                self.evidence.setdefault(item["id"], {})[item["version"]] = {
                    "sha": item["sha"],
                    "body": item["body"],
                    "seq": self.seq,
                }
        elif op == "record":
            ref = f"{begin['session']}/{ack['rid']}"
            self.results[ref] = {"sha": ack["sha"], "content": begin["content"], "seq": self.seq}
            self.sessions.add(begin["session"])
        elif op == "archive":
            for rid, note in begin["targets"]:
                ref = f"{begin['session']}/{rid}"
                self.results[ref]["note"] = note
                self.results[ref]["seq"] = self.seq
                self.archived.add(ref)
        elif op == "recover":
            if not ack["ok"]:
                self.recover_mismatches.append(ack)
        elif op == "delete_evidence":
            self.deleted_evidence[begin["id"]] = ack["receipt"]
        elif op == "delete_session":
            self.deleted_sessions[begin["session"]] = ack["receipt"]
        else:
            raise ValueError(f"unknown op {op!r}")

    def _in_flight(self, begin: dict[str, Any]) -> None:
        op = begin["op"]
        self.in_flight[op] += 1
        if op == "ingest":
            self.tainted_evidence.update(item["id"] for item in begin["items"])
        elif op == "archive":
            self.tainted_results.update(f"{begin['session']}/{rid}" for rid, _ in begin["targets"])
        elif op == "delete_evidence":
            self.tainted_evidence.add(begin["id"])
            self.maybe_deleted_evidence.add(begin["id"])
        elif op == "delete_session":
            self.maybe_deleted_sessions.add(begin["session"])
        # record: an unacknowledged result may exist; nobody relies on it. recover: read-only on history.


def read_model(journal: Path) -> Model:
    model = Model()
    pending: dict[str, Any] | None = None
    text = journal.read_text(encoding="utf-8") if journal.exists() else ""
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            model.bad_lines += 1  # cut by a kill mid-write (never expected: one write() per line)
            continue
        ev = entry["ev"]
        if ev == "begin":
            if pending is not None:
                model._in_flight(pending)
            pending = entry
        elif ev == "ack":
            assert pending is not None and pending["op"] == entry["op"], (pending, entry)
            model._ack(pending, entry)
            pending = None
        elif ev == "start":
            if pending is not None:
                model._in_flight(pending)
            pending = None
            model.runs.append(entry["run"])
        elif ev == "self_kill":
            model.self_kills.append(entry)
        elif ev == "error":
            model.errors.append(entry)
    if pending is not None:
        model._in_flight(pending)
    return model


# ---- the writer ---------------------------------------------------------------------------------


def admin_principal() -> Any:
    from mnemo_sea.archive import Principal, Role, Sensitivity

    return Principal(TENANT, "crash-admin", frozenset({Role.AGENT, Role.ADMIN}), Sensitivity.RESTRICTED)


class Writer:
    def __init__(self, data: Path, journal: Path, run: int, seed: int, kill: str, at: int) -> None:
        self.rng = random.Random(seed)
        self.run = run
        self.kill, self.at = kill, at
        self.fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(self.fd, b"\n")  # a line cut by an earlier kill never swallows ours
        self.model = read_model(journal)
        self.note({"ev": "start", "run": run, "kill": kill, "at": at, "pid": os.getpid()})
        self.pending: dict[str, Any] = {}
        self.writes = 0
        self.index_ops = 0
        self.flushes = 0
        self.counter = 0
        self.session: str | None = None
        self.session_size = 0
        self.mnemo = self._open(data)

    def note(self, entry: dict[str, Any]) -> None:
        os.write(self.fd, (json.dumps(entry) + "\n").encode())

    def begin(self, op: str, **detail: Any) -> None:
        self.pending = {"ev": "begin", "op": op, **detail}
        self.note(self.pending)

    def ack(self, op: str, **detail: Any) -> None:
        entry = {"ev": "ack", "op": op, **detail}
        self.note(entry)
        self.model._ack(self.pending, entry)  # the same bookkeeping the test does

    def die(self, where: str) -> None:
        self.note({"ev": "self_kill", "run": self.run, "where": where})
        os.kill(os.getpid(), signal.SIGKILL)

    def _open(self, data: Path) -> Any:
        from fakes import HashingEmbedder

        from mnemo_sea.archive import Archive
        from mnemo_sea.retrieval import HybridIndex
        from mnemo_sea.system.caches import MemoryCache
        from mnemo_sea.system.mnemo import Mnemo
        from mnemo_sea.system.wiring.layout import ARCHIVE_FILE, INDEX_DIR

        archive = Archive.open(str(data / ARCHIVE_FILE))
        index = HybridIndex.open(data / INDEX_DIR, embedder=HashingEmbedder())
        mnemo = Mnemo(archive, index, MemoryCache(), sync_writes=False)
        self._install_hooks(index)
        mnemo.sync()  # replay what an earlier kill left pending (as Mnemo.open does)
        return mnemo

    def _install_hooks(self, index: Any) -> None:
        """Kill points inside the indexer's work: wrap this index object's mutating methods."""

        def wrap(name: str) -> None:
            original: Callable[..., Any] = getattr(index, name)

            def hooked(*args: Any, **kw: Any) -> Any:
                self.index_ops += 1
                if self.kill == "index_op" and self.index_ops == self.at:
                    self.die(f"before index {name} #{self.index_ops}")
                out = original(*args, **kw)
                if name == "flush":
                    self.flushes += 1
                    if self.kill == "after_flush" and self.flushes == self.at:
                        self.die(f"after index flush #{self.flushes}, before mark_done")
                return out

            setattr(index, name, hooked)

        for name in ("upsert", "delete", "set_status", "flush"):
            wrap(name)

    def after_write(self) -> None:
        """The write committed and was acknowledged; now (maybe die, else) apply it to the index."""
        self.writes += 1
        if self.kill == "after_commit" and self.writes == self.at:
            self.die(f"after commit of write #{self.writes}, before sync")
        self.mnemo.sync()

    def next_id(self) -> int:
        self.counter += 1
        return self.counter

    def text(self, tok: str) -> str:
        words = self.rng.choices(WORDS, k=self.rng.randint(4, 14))
        words.insert(self.rng.randrange(len(words) + 1), tok)
        return " ".join(words)

    # ---- operations
    def ingest(self) -> None:
        from mnemo_sea.archive import EvidenceInput

        items = []
        live = self.model.live_evidence()
        n = self.rng.choice((1, 1, 2))
        for _ in range(n):
            k = self.next_id()
            if live and self.rng.random() < 0.45:
                eid = live.pop(self.rng.randrange(len(live)))  # a new version of an acknowledged record
            else:
                eid = f"ev:{self.run}:{k}"
            items.append({"id": eid, "body": self.text(token("tok", self.run, k))})
        self.begin("ingest", items=items)
        report = self.mnemo.ingest(
            admin_principal(),
            [EvidenceInput(body=i["body"], source="kb", evidence_id=i["id"]) for i in items],
        )
        acked = [
            {"id": rec.evidence_id, "version": rec.version, "sha": rec.content_sha256, "body": i["body"]}
            for rec, i in zip(report.stored, items, strict=True)
        ]
        self.ack("ingest", items=acked)
        self.after_write()

    def record_and_archive(self) -> None:
        if self.session is None or self.session_size >= 4:
            self.session = f"s{self.run}x{self.next_id()}"
            self.session_size = 0
        session = self.session
        refs = []
        for _ in range(self.rng.randint(1, 2)):
            k = self.next_id()
            content: bytes
            if self.rng.random() < 0.3:
                content = self.rng.randbytes(self.rng.randint(16, 2000))  # binary: kept, not searchable
            else:
                content = (self.text(token("res", self.run, k)) + " 价格 </context_result>").encode()
            self.begin("record", session=session, content=content.hex())
            result = self.mnemo.record(admin_principal(), session, "logs.search", content)
            self.ack("record", rid=result.result_id, sha=result.content_sha256)
            self.session_size += 1
            refs.append(result.result_id)
        targets = [[rid, f"set aside {token('note', self.run, self.next_id())} {rid}"] for rid in refs]
        key = f"crash-{self.run}-{self.next_id()}"
        self.begin("archive", session=session, targets=targets, key=key)
        receipt = self.mnemo.archive_results(
            admin_principal(), session, [tuple(x) for x in targets], idempotency_key=key
        )
        if set(receipt.archived) != set(refs):
            self.error("archive", f"archived {receipt.archived}, sent {refs}")
        self.ack("archive", archived=list(receipt.archived))
        self.after_write()

    def recover(self) -> None:
        choices = self.model.recoverable()
        if not choices:
            return
        ref = self.rng.choice(choices)
        session, _, rid = ref.rpartition("/")
        self.begin("recover", ref=ref)
        got = self.mnemo.recover(admin_principal(), session, rid)
        want = self.model.results[ref]
        ok = (
            got.content.hex() == want["content"]
            and sha256(got.content) == got.original.content_sha256 == want["sha"]
        )
        self.ack("recover", ref=ref, ok=ok)
        if not ok:
            self.error("recover", f"{ref} came back different from what was recorded")

    def delete_evidence(self) -> None:
        live = self.model.live_evidence()
        if not live:
            return
        eid = self.rng.choice(live)
        self.begin("delete_evidence", id=eid)
        receipt = self.mnemo.delete_evidence(admin_principal(), eid)
        self.ack("delete_evidence", receipt=receipt_to_json(receipt))
        self.after_write()

    def delete_session(self) -> None:
        usable = self.model.usable_sessions()
        if not usable:
            return
        session = self.rng.choice(usable)
        self.begin("delete_session", session=session)
        receipt = self.mnemo.delete_session(admin_principal(), session)
        self.ack("delete_session", receipt=receipt_to_json(receipt))
        if session == self.session:
            self.session = None
        self.after_write()

    def error(self, op: str, message: str) -> None:
        self.note({"ev": "error", "op": op, "error": message})
        os._exit(3)

    def loop(self) -> None:
        ops = (
            (self.ingest, 30),
            (self.record_and_archive, 30),
            (self.recover, 15),
            (self.delete_evidence, 12),
            (self.delete_session, 8),
        )
        while True:
            (op,) = self.rng.choices([o for o, _ in ops], weights=[w for _, w in ops])
            op()


def writer_main(cmd: dict[str, Any]) -> None:
    """In the forked child: open, say so, work until killed. Never returns."""
    try:
        writer = Writer(
            Path(cmd["data"]), Path(cmd["journal"]), cmd["run"], cmd["seed"], cmd["kill"], cmd["at"]
        )
        os.write(1, f"opened {os.getpid()}\n".encode())
        writer.loop()
    except BaseException:
        traceback.print_exc()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(3)
    os._exit(4)


def reply(line: str) -> None:
    """One line to the test, in one `write`: the writers print to the same pipe, and a line
    written in parts can take a writer's line between them ("pid 18986opened 18986"). `print`
    writes its text and its newline apart when stdout is unbuffered, as it is here: pytest-xdist's
    workers run with PYTHONUNBUFFERED=1, which the server inherits."""
    os.write(1, f"{line}\n".encode())


def serve() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: fakes
    # Import everything a writer needs once, before any fork (no store or index is opened here).
    import fakes  # noqa: F401

    import mnemo_sea.system.caches
    import mnemo_sea.system.mnemo  # noqa: F401

    reply("ready")
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        if cmd["op"] == "run":
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                writer_main(cmd)
            reply(f"pid {pid}")
        elif cmd["op"] == "reap":
            pid, status = os.waitpid(int(cmd["pid"]), 0)
            reply(f"status {pid} {os.waitstatus_to_exitcode(status)}")
        else:
            reply(f"unknown command {cmd!r}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        sys.exit(serve())
    print(f"usage: {sys.argv[0]} serve", file=sys.stderr)
    sys.exit(2)
