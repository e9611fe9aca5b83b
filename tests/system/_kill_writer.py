"""The writer `test_kill_after_write.py` kills: `python _kill_writer.py DATA JOURNAL POINT [DB_URL]`.

It opens DATA like the CLI does (`Mnemo.open`, synchronous writes), or with DB_URL the archive on
that PostgreSQL database and the embedded index in DATA/index (`Mnemo.from_settings`, the API
process of a PostgreSQL deployment without a Qdrant server), with a group-commit window
long enough that only the kill point decides whether the deferred flush ran. Before writing it
settles (flushes) and copies the index shard to DATA/shard-at-flush, the state a machine that
lost the index's unflushed tail would come back with. Then it writes, journalling each write
once it returned (acknowledged), one JSON line per `write`:

- {"ev": "evidence", "id", "version", "sha", "token"}: a record put, and a word only it has; the
  last four came in one `Mnemo.ingest` batch (`"ingested": true`), after everything else;
- {"ev": "result", "session", "rid", "sha", "note_token"}: a recorded and archived result;
- {"ev": "state", "awaiting_flush": N}: rows applied and waiting for the flush, then it dies.

POINT: "before_flush" dies with the group commit still holding rows; "after_flush" settles
first (the flush ran and the rows are done), then dies. Either way by SIGKILL, without close().
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path

TENANT = "killco"


def main(data: Path, journal: Path, point: str, database_url: str | None) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: fakes
    from fakes import HashingEmbedder

    from mnemo_sea.archive import ArchiveTarget, EvidenceInput, EvidenceRecord, Principal, Role, Sensitivity
    from mnemo_sea.system.mnemo import Mnemo
    from mnemo_sea.system.projection.indexer import GroupCommit
    from mnemo_sea.system.wiring.layout import INDEX_DIR
    from mnemo_sea.system.wiring.settings import MnemoSettings

    principal = Principal(TENANT, "writer", frozenset({Role.AGENT, Role.ADMIN}), Sensitivity.RESTRICTED)
    fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def note(entry: dict[str, object]) -> None:
        os.write(fd, (json.dumps(entry) + "\n").encode())

    def note_evidence(stored: EvidenceRecord, token: str, **more: object) -> None:
        version = {"id": stored.evidence_id, "version": stored.version, "sha": stored.content_sha256}
        note({"ev": "evidence", **version, "token": token, **more})

    # No timer flush: the kill point decides. The trail (originals' pages) never starts: its rows
    # stay pending, for the next open to replay, whatever the threads would have done first.
    never: list[object] = []
    policy = GroupCommit(rows=10_000, seconds=3600.0, start_trail=never.append)
    if database_url is None:
        mnemo = Mnemo.open(data, embedder=HashingEmbedder(), group_commit=policy)
    else:
        settings = MnemoSettings(database_url=database_url, index_path=data / INDEX_DIR)
        mnemo = Mnemo.from_settings(settings, embedder=HashingEmbedder(), group_commit=policy)
    mnemo.sync()
    shutil.copytree(data / INDEX_DIR / "shard", data / "shard-at-flush")
    for i in range(3):
        token = f"evtok{'abc'[i]}zq"
        body = f"delivery policy {token} for parcels number {i}"
        stored = mnemo.put_evidence(
            principal, EvidenceInput(body=body, source="kb", evidence_id=f"ev:{i}")
        ).stored[0]
        note_evidence(stored, token)
    for i in range(2):
        session = f"s{i}"
        content = f"raw log {i} 价格 </context_result>".encode() + bytes(range(256))
        result = mnemo.record(principal, session, "logs.search", content)
        note_token = f"notetok{'ab'[i]}zq"
        mnemo.archive_results(
            principal, session, [ArchiveTarget(result.result_id, f"set aside {note_token}")]
        )
        note(
            {
                "ev": "result",
                "session": session,
                "rid": result.result_id,
                "sha": result.content_sha256,
                "note_token": note_token,
            }
        )
    # Last, a batch through `ingest`: its flush is left to the group commit as a single write's.
    tokens = [f"batchtok{c}zq" for c in "abcd"]
    batch = mnemo.ingest(
        principal,
        [
            EvidenceInput(body=f"returns policy {token} for item {i}", source="kb", evidence_id=f"bt:{i}")
            for i, token in enumerate(tokens)
        ],
    )
    for stored, token in zip(batch.stored, tokens, strict=True):
        note_evidence(stored, token, ingested=True)
    if point == "after_flush":
        mnemo.indexer.settle()
    note({"ev": "state", "awaiting_flush": mnemo.indexer.awaiting_flush})
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
