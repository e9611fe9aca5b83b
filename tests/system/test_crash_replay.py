"""Crash test of the whole system: SIGKILL writers of one data folder, reopen, everything holds.

Issue 4 (Consistency): kill the process at random points during ingest, archive, recover and
delete (at least 100 runs, scripted); after restart and replay, fsck reports zero problems and
every original hash-verifies.

One data folder (SQLite archive + Qdrant Edge index) lives through every run. Each run forks a
writer (`_crash_worker.py`, a fork server, so the slow import happens once) that does a random
mix of ingest (new ids and new versions), record + archive, recover, delete evidence and delete
session, journalling each operation before it starts and once it returned (acknowledged). The
writer dies by SIGKILL:

- from outside: at a random moment, possibly while it is still opening and replaying, or
  50-400 ms after it opened or as soon as it acknowledged a few operations;
- from inside, at chosen points the outside cannot hit reliably: right after an SQL commit and
  before the index apply, inside the index apply before an index operation, and after the index
  flush but before the outbox rows are marked done.

After every kill the test opens the folder with `Mnemo.open` (which must get the directory lock
and replay the outbox) and checks: fsck has no problem; every acknowledged evidence version
reads back byte-exact with a verifying hash (older versions superseded); every acknowledged
archived result recovers byte-exact with a verifying hash; no acknowledged deletion is reachable
(archive, index points, facade and raw index search in each mode, `verify_deleted`); an
operation that was in flight at the kill took effect all or nothing; every stored original
hash-verifies. Each check covers what changed since the previous one plus a random sample of
the rest; every 25 runs and at the end it covers everything.
"""

from __future__ import annotations

import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from _crash_worker import (
    TENANT,
    Model,
    admin_principal,
    read_model,
    receipt_from_json,
    sha256,
)
from fakes import HashingEmbedder
from sqlalchemy import select

from mnemo_sea.archive import ArchiveError
from mnemo_sea.archive.rules.refs import ResultIndexId
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.retrieval import AccessScope, SearchMode, SearchQuery
from mnemo_sea.retrieval.filters import evidence_filter
from mnemo_sea.system.fsck import run_fsck
from mnemo_sea.system.mnemo import Mnemo

WORKER = Path(__file__).with_name("_crash_worker.py")
RUNS = 110
FULL_CHECK_EVERY = 25
SAMPLE = 8
TIMEOUT_S = 120.0  # a reply that takes longer is a hang; a loaded machine replies in seconds
MODES = (SearchMode.HYBRID, SearchMode.BM25, SearchMode.DENSE)


class ForkServer:
    """The worker's fork server: send JSON commands, wait for reply lines (with a timeout)."""

    def __init__(self, stderr: IO[str]) -> None:
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stash: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put("<eof>")

    def send(self, command: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def expect(self, prefix: str, pid: int | None = None, timeout: float = TIMEOUT_S) -> str | None:
        """The next line `prefix [pid] ...`; None on timeout or when the server is gone."""

        def wanted(line: str) -> bool:
            words = line.split()
            return bool(words) and words[0] == prefix and (pid is None or words[1] == str(pid))

        for line in self.stash:
            if wanted(line):
                self.stash.remove(line)
                return line
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return None
            if line == "<eof>":
                self.lines.put(line)
                return None
            if wanted(line):
                return line
            self.stash.append(line)
        return None

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def kill_plan(run: int, rng: random.Random) -> tuple[str, int]:
    slot = run % 10
    if slot in (1, 6):
        return "after_commit", rng.randint(1, 4)
    if slot == 3:
        return "index_op", rng.randint(1, 12)
    if slot == 8:
        return "after_flush", rng.randint(1, 3)
    return "none", 0


def acks_since(journal: Path, offset: int) -> int:
    with journal.open("rb") as f:
        f.seek(offset)
        return f.read().count(b'"ev": "ack"')


# ---- the checks ---------------------------------------------------------------------------------


class Checker:
    def __init__(
        self, m: Mnemo, model: Model, rng: random.Random, since_seq: int, new_deletions: set[str], full: bool
    ) -> None:
        self.m, self.model, self.rng = m, model, rng
        self.since, self.new_deletions, self.full = since_seq, new_deletions, full
        self.p = admin_principal()
        self.scope = AccessScope(TENANT, clearance=int(self.p.clearance), owners=None)
        self.counts: Counter[str] = Counter()

    def pick(self, keys: list[str], is_new: Any, sample: int = SAMPLE) -> list[str]:
        if self.full:
            return keys
        new = [k for k in keys if is_new(k)]
        old = [k for k in keys if not is_new(k)]
        return new + self.rng.sample(old, min(sample, len(old)))

    def index_points(self, evidence_id: str) -> int:
        return self.m.index.backend.count(evidence_filter(TENANT, evidence_id))

    def unreachable_by_search(self, text: str, evidence_id: str) -> None:
        for mode in MODES:
            found = self.m.search(self.p, text, mode=mode, limit=50)
            assert found.status in ("results", "no_match"), (mode, found)
            assert evidence_id not in {h.evidence_id for h in found.hits}, (
                f"deleted {evidence_id} returned by {mode} search"
            )
            raw = self.m.index.search(self.scope, SearchQuery(text, limit=50, mode=mode))
            assert evidence_id not in {h.evidence_id for h in raw.hits}, (
                f"deleted {evidence_id} still in the index ({mode} leg)"
            )
            self.counts["searches"] += 2

    def found_by_bm25(self, text: str, evidence_id: str) -> None:
        found = self.m.search(self.p, text, mode=SearchMode.BM25, limit=10)
        assert evidence_id in {h.evidence_id for h in found.hits}, (
            f"acknowledged {evidence_id} not found by its own unique words: {found}"
        )

    # -- evidence
    def evidence_present(self, eid: str, strict_status: bool) -> None:
        versions = self.model.evidence[eid]
        newest = max(versions)
        for version, want in sorted(versions.items()):
            rec, content = self.m.archive.get_evidence(self.p, eid, version=version, with_content=True)
            assert content is not None
            assert content == want["body"].encode(), f"{eid}@{version} reads back different bytes"
            assert sha256(content) == rec.content_sha256 == want["sha"], f"{eid}@{version} hash"
            if version < newest:
                assert rec.status == "superseded", (eid, version, rec.status)
            elif strict_status:
                assert rec.status == "active", (eid, version, rec.status)
            else:
                assert rec.status in ("active", "superseded"), (eid, version, rec.status)
            self.counts["evidence versions"] += 1
        if strict_status:
            self.found_by_bm25(versions[newest]["body"], eid)

    def evidence_gone(self, eid: str) -> None:
        with pytest.raises(ArchiveError):
            self.m.archive.get_evidence(self.p, eid)
        assert self.index_points(eid) == 0, f"deleted {eid} still has index points"
        for want in self.model.evidence.get(eid, {}).values():
            self.unreachable_by_search(want["body"], eid)

    def check_evidence(self) -> None:
        model = self.model
        ids = sorted(set(model.evidence) - set(model.deleted_evidence) - model.maybe_deleted_evidence)
        newest_seq = {e: max(v["seq"] for v in model.evidence[e].values()) for e in ids}
        for eid in self.pick(ids, lambda e: newest_seq[e] > self.since):
            self.evidence_present(eid, strict_status=eid not in model.tainted_evidence)
        for eid in self.pick(sorted(model.deleted_evidence), lambda e: e in self.new_deletions, 2):
            self.evidence_gone(eid)
            check = self.m.verify_deleted(self.p, receipt_from_json(model.deleted_evidence[eid]))
            assert check.ok, f"verify_deleted({eid}): {check}"
            self.counts["deleted evidence"] += 1
        for eid in sorted(model.maybe_deleted_evidence - set(model.deleted_evidence)):
            # A delete was in flight at a kill: it took effect wholly or not at all.
            try:
                self.m.archive.get_evidence(self.p, eid)
            except ArchiveError:
                self.evidence_gone(eid)
                self.counts["in-flight deletes (done)"] += 1
                continue
            if eid in model.evidence:
                self.evidence_present(eid, strict_status=False)
            self.counts["in-flight deletes (not done)"] += 1

    # -- sessions
    def result_present(self, ref: str) -> None:
        session, _, rid = ref.rpartition("/")
        want = self.model.results[ref]
        got = self.m.recover(self.p, session, rid)
        assert got.content.hex() == want["content"], f"{ref} recovered different bytes"
        assert sha256(got.content) == got.original.content_sha256 == want["sha"], f"{ref} hash"
        assert got.original.state == "archived", (ref, got.original.state)
        assert got.original.note == want["note"], (ref, got.original.note)
        self.counts["archived results"] += 1

    def session_gone(self, session: str) -> None:
        refs = [r for r in self.model.results if Model.session_of(r) == session]
        for ref in refs:
            with pytest.raises(ArchiveError):
                self.m.recover(self.p, session, ref.rpartition("/")[2])
            assert self.index_points(str(ResultIndexId.of_ref(ref))) == 0, f"deleted {ref} still indexed"
            if "note" in self.model.results[ref]:
                self.unreachable_by_search(self.model.results[ref]["note"], str(ResultIndexId.of_ref(ref)))

    def check_sessions(self) -> None:
        model = self.model
        gone = set(model.deleted_sessions) | model.maybe_deleted_sessions
        refs = sorted(r for r in model.archived if Model.session_of(r) not in gone)
        for ref in self.pick(refs, lambda r: model.results[r]["seq"] > self.since):
            self.result_present(ref)
            if self.full or model.results[ref]["seq"] > self.since:
                self.found_by_bm25(model.results[ref]["note"], str(ResultIndexId.of_ref(ref)))
        for session in self.pick(sorted(model.deleted_sessions), lambda s: s in self.new_deletions, 2):
            self.session_gone(session)
            check = self.m.verify_deleted(self.p, receipt_from_json(model.deleted_sessions[session]))
            assert check.ok, f"verify_deleted({session}): {check}"
            self.counts["deleted sessions"] += 1
        for session in sorted(model.maybe_deleted_sessions - set(model.deleted_sessions)):
            archived = [r for r in model.archived if Model.session_of(r) == session]
            try:
                left = self.m.archive.list_results(self.p, session)
            except ArchiveError:
                left = []
            if not left:
                self.session_gone(session)
                self.counts["in-flight deletes (done)"] += 1
            else:
                for ref in archived:
                    self.result_present(ref)
                self.counts["in-flight deletes (not done)"] += 1

    def check_blobs(self) -> None:
        with self.m.archive.store.read() as conn:
            for row in conn.execute(select(t.blobs.c.sha256, t.blobs.c.size, t.blobs.c.content)):
                content = bytes(row.content)
                assert sha256(content) == row.sha256, f"original {row.sha256[:12]} fails its hash"
                assert len(content) == row.size
                self.counts["originals"] += 1


def check_store(
    data: Path,
    journal: Path,
    rng: random.Random,
    since_seq: int,
    seen_deletions: set[str],
    full: bool,
    run: int,
) -> tuple[Model, Counter[str]]:
    model = read_model(journal)
    assert not model.errors, f"the writer saw a wrong answer: {model.errors}"
    assert not model.recover_mismatches, model.recover_mismatches
    try:
        m = Mnemo.open(data, embedder=HashingEmbedder())  # takes the index lock, replays the outbox
    except Exception as e:
        pytest.fail(
            f"after SIGKILL of writer run {run}, Mnemo.open could not open the data folder: "
            f"{type(e).__name__}: {e}"
        )
    try:
        report = run_fsck(m)
        assert report.ok, f"fsck after run {run}: {report.to_dict()}"
        new_deletions = (set(model.deleted_evidence) | set(model.deleted_sessions)) - seen_deletions
        checker = Checker(m, model, rng, since_seq, new_deletions, full)
        checker.check_evidence()
        checker.check_sessions()
        checker.check_blobs()
        assert run_fsck(m).ok  # the checks' own recoveries are consistent writes too
        return model, checker.counts
    finally:
        m.close()


# ---- the test -----------------------------------------------------------------------------------


@pytest.fixture
def data_root(tmp_path: Path) -> Iterator[Path]:
    """Where the data folder lives: tmpfs when the machine has one, else the test's tmp dir.

    A SIGKILL is a process crash, not a power cut: what a write() handed to the kernel survives
    it whether or not it reached the disk, so tmpfs loses no realism here, and it spares the
    fsyncs of every index flush (about 0.5 s per write on this machine's disk) so that each run
    gets through many operations before its kill.
    """
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="mnemo-crash-", dir=shm))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_writer(
    server: ForkServer, cmd: dict[str, Any], journal: Path, rng: random.Random, err_path: Path
) -> None:
    offset = journal.stat().st_size if journal.exists() else 0
    server.send({"op": "run", **cmd})
    line = server.expect("pid")
    if line is None:
        pytest.fail(f"fork server did not answer:\n{err_path.read_text()}")
    pid = int(line.split()[1])
    try:
        if cmd["kill"] == "none":
            if rng.random() < 0.25:
                time.sleep(rng.uniform(0.0, 0.3))  # may land while it opens and replays
            else:
                if server.expect("opened", pid) is None:
                    pytest.fail(f"writer run {cmd['run']} did not open:\n{err_path.read_text()}")
                delay, enough = rng.uniform(0.05, 0.4), rng.randint(1, 6)
                start = time.monotonic()
                while time.monotonic() - start < delay and acks_since(journal, offset) < enough:
                    time.sleep(0.005)
            os.kill(pid, signal.SIGKILL)
    finally:
        server.send({"op": "reap", "pid": pid})
        status = server.expect("status", pid, timeout=TIMEOUT_S)
        if status is None:  # a self-kill that never came: kill it, then report
            os.kill(pid, signal.SIGKILL)
            server.expect("status", pid)
            pytest.fail(f"writer run {cmd['run']} ({cmd['kill']}) never died:\n{err_path.read_text()}")
    code = int(status.split()[2])
    assert code == -signal.SIGKILL, (
        f"writer run {cmd['run']} ended with {code}, not SIGKILL:\n{err_path.read_text()}"
    )


def test_killed_writers_leave_a_consistent_searchable_archive(tmp_path: Path, data_root: Path) -> None:
    seed = random.SystemRandom().randrange(2**32)
    print(f"crash replay seed: {seed}")  # shown with a failure
    rng = random.Random(seed)
    data, journal, err_path = data_root / "data", tmp_path / "journal.jsonl", tmp_path / "worker.err"
    Mnemo.open(data, embedder=HashingEmbedder()).close()  # the folder exists before the first kill

    kills: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    since_seq = 0
    seen_deletions: set[str] = set()
    started = time.monotonic()
    with err_path.open("w") as err:
        server = ForkServer(err)
        try:
            if server.expect("ready") is None:
                pytest.fail(f"fork server did not start:\n{err_path.read_text()}")
            for run in range(RUNS):
                kill, at = kill_plan(run, rng)
                cmd = {
                    "data": str(data),
                    "journal": str(journal),
                    "run": run,
                    "seed": rng.randrange(2**31),
                    "kill": kill,
                    "at": at,
                }
                run_writer(server, cmd, journal, rng, err_path)
                kills[kill] += 1
                full = (run + 1) % FULL_CHECK_EVERY == 0 or run == RUNS - 1
                model, counts = check_store(data, journal, rng, since_seq, seen_deletions, full, run)
                totals.update(counts)
                since_seq = model.seq
                seen_deletions = set(model.deleted_evidence) | set(model.deleted_sessions)
        finally:
            server.close()
    elapsed = time.monotonic() - started

    model = read_model(journal)
    print(f"{RUNS} kill runs in {elapsed:.1f}s: kills {dict(kills)}")
    print(f"acknowledged {dict(model.acked)}; in flight at a kill {dict(model.in_flight)}")
    print(f"checked {dict(totals)}")
    assert sum(kills.values()) == RUNS >= 100
    # Every inside kill point fired where it was aimed, and the outside kills hit mid-operation too.
    inside = [k for k in kills if k != "none"]
    assert len(model.self_kills) == sum(kills[k] for k in inside), model.self_kills
    wheres = Counter(e["where"].split(" #")[0].split(" of write")[0] for e in model.self_kills)
    assert any(w.startswith("after commit") for w in wheres), wheres
    assert any(w.startswith("before index") for w in wheres), wheres
    assert any(w.startswith("after index flush") for w in wheres), wheres
    # Some of the outside kills must land mid-operation, or the run tested too little (the kill
    # points inside the writer, asserted above, aim at mid-operation moments by design). How many
    # do is a matter of timing on a shared machine: 10 and 12 of 110 were seen in loaded CI runs,
    # so the floor is a twentieth, which still fails a run where the outside kills all missed.
    assert sum(model.in_flight.values()) >= RUNS // 20, model.in_flight
    for op in ("ingest", "record", "archive", "recover", "delete_evidence", "delete_session"):
        assert model.acked[op] > 0, f"no acknowledged {op}: the test exercised too little"
    assert model.deleted_evidence and model.deleted_sessions
    assert {e for e, versions in model.evidence.items() if len(versions) > 1}, "no new versions"

    # After all the kills the system still works end to end.
    with Mnemo.open(data, embedder=HashingEmbedder()) as m:
        from mnemo_sea.archive import EvidenceInput

        p = admin_principal()
        m.ingest(p, [EvidenceInput(body="zzfinal closing words", source="kb", evidence_id="final:1")])
        assert [h.evidence_id for h in m.search(p, "zzfinal", mode=SearchMode.BM25).hits] == ["final:1"]
        receipt = m.delete_evidence(p, "final:1")
        assert m.verify_deleted(p, receipt).ok
        assert m.search(p, "zzfinal", mode=SearchMode.BM25).status == "no_match"
        assert run_fsck(m).ok
