"""What `Mnemo.ingest(progress=)` and `load_documents(progress=)` report: files to read at once,
then each file; the stored batch; the chunk total before any chunk is embedded; chunks and
indexed documents moving inside one batch, never back, ending at their totals."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemo_sea.archive import EvidenceInput, Principal
from mnemo_sea.system.documents import load_documents
from mnemo_sea.system.mnemo import IngestProgress, Mnemo

PARAGRAPH = "The herd moves to the upper pasture when the hay runs low in the barn. "


def items(sizes: list[int], prefix: str = "p") -> list[EvidenceInput]:
    """Documents of `sizes[i]` paragraphs each (~70 characters; a chunk holds up to 2,000)."""
    return [
        EvidenceInput(body=f"{prefix} {i}. " + PARAGRAPH * n, source="farm", evidence_id=f"{prefix}:{i}")
        for i, n in enumerate(sizes)
    ]


def test_chunks_and_documents_move_inside_one_batch_after_the_chunk_total_is_known(
    mnemo: Mnemo, agent: Principal
) -> None:
    mnemo.index.embed_step = 2  # several embedding steps in one small batch
    seen: list[IngestProgress] = []
    report = mnemo.ingest(agent, items([80, 5, 40, 5, 120, 30]), progress=seen.append)

    assert report.new_versions == 6 and report.index is not None and report.index.pending == 0
    first = seen[0]
    assert (first.documents, first.stored, first.indexed, first.chunks_embedded, first.chunks) == (
        6,
        6,
        0,
        0,
        None,
    )
    known = next(i for i, p in enumerate(seen) if p.chunks is not None)
    assert all(p.chunks_embedded == 0 for p in seen[: known + 1])  # the total before any chunk
    total = seen[known].chunks
    assert total is not None and all(p.chunks == total for p in seen[known:])
    # The total is every chunk the index now holds for these (new) documents.
    assert total == mnemo.index.count("clinic-a") > 6
    for field in ("stored", "indexed", "chunks_embedded"):
        values = [getattr(p, field) for p in seen]
        assert values == sorted(values), field
    # Inside the one batch: chunks move before any document is done, and documents are indexed
    # while chunks of others are still to embed (not all at the end).
    assert any(0 < p.chunks_embedded < total and p.indexed == 0 for p in seen)
    assert any(0 < p.indexed < 6 and p.chunks_embedded < total for p in seen)
    assert (seen[-1].indexed, seen[-1].chunks_embedded) == (6, total)
    assert all(p.files is None for p in seen)


def test_an_ingest_that_embeds_nothing_says_its_chunk_total_is_zero(mnemo: Mnemo, agent: Principal) -> None:
    mnemo.ingest(agent, items([3, 3]))
    seen: list[IngestProgress] = []
    report = mnemo.ingest(agent, items([3, 3]), progress=seen.append)

    assert report.unchanged == 2
    assert (seen[0].stored, seen[0].indexed, seen[0].chunks) == (2, 2, None)  # indexed already
    assert (seen[-1].indexed, seen[-1].chunks_embedded, seen[-1].chunks) == (2, 0, 0)


def test_the_loader_reports_the_files_to_read_before_reading_the_first(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for name in ("a.txt", "b.md", "c.txt"):
        (folder / name).write_text(f"note {name}")
    (folder / "d.jsonl").write_text('{"body": "one"}\n{"body": "two"}\n')
    (folder / "e.png").write_bytes(b"\x89PNG")  # not a document: not counted
    seen: list[IngestProgress] = []
    loaded = load_documents(folder, progress=seen.append)

    assert [(p.files, p.files_read) for p in seen] == [(4, n) for n in range(5)]
    assert [p.documents for p in seen] == [0, 1, 2, 3, 5]
    assert len(loaded) == 5 and all((p.stored, p.indexed, p.chunks) == (0, 0, None) for p in seen)


def test_a_callback_that_fails_mid_batch_raises_its_own_error_and_costs_the_rows_nothing(
    mnemo: Mnemo, agent: Principal
) -> None:
    from sqlalchemy import select

    from mnemo_sea.archive.storage import schema as t

    mnemo.index.embed_step = 2

    def broken(p: IngestProgress) -> None:
        if p.chunks_embedded:
            raise ValueError("the caller's own bug")

    # A ValueError is what the indexer takes for a row's own failure; the callback's is not one.
    with pytest.raises(ValueError, match="the caller's own bug"):
        mnemo.ingest(agent, items([80, 5, 40]), progress=broken)
    with mnemo.archive.store.read() as conn:
        rows = conn.execute(select(t.outbox).where(t.outbox.c.done_at.is_(None))).all()
    assert rows and all(r.attempts == 0 and r.last_error is None for r in rows)
    # The records are stored; the next sync indexes them.
    assert mnemo.sync().failed == 0
    assert len(mnemo.search(agent, "herd upper pasture", limit=10, mode="bm25").hits) == 3
