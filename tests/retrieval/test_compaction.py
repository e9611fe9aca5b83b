"""Compaction of the embedded index: Qdrant Edge only tombstones a deleted point, its payload
strings and vectors stay in the shard's files; `compact()` rewrites the shard with the live
points only. The files are scanned for the deleted point's bytes, searches must answer the same,
and what a crash leaves mid-swap is repaired on open."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from mnemo_sea.retrieval import (
    AccessScope,
    EvidenceDocument,
    HybridIndex,
    IndexUnavailable,
    SearchMode,
    SearchQuery,
    edge_backend,
)

MARKER = "zqxcompactmark"
SCOPE = AccessScope("t1", clearance=3)


def files_holding(folder: Path, needle: bytes) -> list[str]:
    files = (p for p in folder.rglob("*") if p.is_file())
    return sorted(str(p.relative_to(folder)) for p in files if needle in p.read_bytes())


def live_docs() -> list[EvidenceDocument]:
    topics = ("delivery policy", "refund rules", "warehouse hours", "billing address")
    return [
        EvidenceDocument(
            tenant_id="t1" if i % 3 else "t2",
            evidence_id=f"keep-{i}",
            version=1 + i % 2,
            # Distinct lengths give distinct scores: the engine breaks ties by internal offsets,
            # which a rewrite may reorder.
            text=f"{topics[i % 4]} note about {topics[(i + 1) % 4]} " + "more " * i,
            source=f"src-{i % 5}",
            scope="team" if i % 2 else "default",
            owner=None if i % 4 else f"user-{i}",
            sensitivity=i % 3,
        )
        for i in range(60)
    ]


def doomed() -> EvidenceDocument:
    return EvidenceDocument(
        tenant_id="t1",
        evidence_id="doomed-1",
        version=1,
        text="a unique statement about zebras and xylophones",
        source=f"src-{MARKER}",
        scope=f"scope{MARKER}",
        owner=f"owner{MARKER}",
    )


def answers(index: HybridIndex) -> list[list[tuple[str, int, int, float]]]:
    """Results of a fixed set of searches, every mode, as comparable tuples (best first)."""
    out = []
    for text in ("delivery policy", "refund", "warehouse hours billing", "more note"):
        for mode in (SearchMode.HYBRID, SearchMode.BM25, SearchMode.DENSE):
            hits = index.search(SCOPE, SearchQuery(text, limit=50, mode=mode)).hits
            # Equal scores (a dense cosine of 0 for a text sharing no word) are ranked by internal
            # offsets, which a rewrite reorders: compared as sets of equals, and fused hits only
            # where the lexical leg found them (their dense ranks are then free of such ties).
            keep = [h for h in hits if mode is not SearchMode.HYBRID or h.bm25 is not None]
            ranked = [(h.evidence_id, h.version, h.chunk, round(h.score, 5)) for h in keep]
            assert ranked, (text, mode)
            out.append(sorted(ranked, key=lambda r: (-r[3], r[0])))
    return out


def test_compaction_removes_every_byte_of_a_deleted_point_and_keeps_the_rest(
    tmp_path: Path, embedder_factory: type
) -> None:
    folder = tmp_path / "ix"
    embedder = embedder_factory()
    # The deleted point's dense vector as Edge stores it (cosine: unit length, float32).
    vector = embedder.embed_documents([doomed().text])[0].astype(np.float32)
    vector_bytes = (vector / np.linalg.norm(vector)).astype(np.float32).tobytes()
    with HybridIndex.open(folder, embedder=embedder) as index:
        index.upsert([*live_docs(), doomed()])
        index.flush()
        assert files_holding(folder, MARKER.encode())  # the scan can see the payload strings
        assert files_holding(folder, vector_bytes)  # ... and the vector
        index.delete("t1", "doomed-1")
        index.flush()
        index.optimize()
        # Today's engine keeps both after delete, flush and optimize: compaction is needed.
        assert files_holding(folder, MARKER.encode())
        before, counts = answers(index), (index.count(), index.count("t1"), index.count("t2"))
        assert index.deleted_since_compaction == 1

        assert index.compact() == counts[0]

        assert files_holding(folder, MARKER.encode()) == []
        assert files_holding(folder, vector_bytes) == []
        assert index.deleted_since_compaction == 0
        assert (index.count(), index.count("t1"), index.count("t2")) == counts
        assert answers(index) == before
        assert sorted(p.name for p in folder.iterdir() if p.name.startswith("shard")) == ["shard"]
        index.upsert([doomed()])  # the swapped-in shard takes writes, with its payload indexes
        filtered = SearchQuery("zebras", sources=frozenset({f"src-{MARKER}"}))
        assert [h.evidence_id for h in index.search(SCOPE, filtered).hits] == ["doomed-1"]
        index.delete("t1", "doomed-1")
    with HybridIndex.open(folder, embedder=embedder_factory()) as index:  # and it survives reopening
        assert (index.count(), index.count("t1"), index.count("t2")) == counts
        assert answers(index) == before


def _index_with_docs(folder: Path, embedder_factory: type) -> list[list[tuple[str, int, int, float]]]:
    with HybridIndex.open(folder, embedder=embedder_factory()) as index:
        index.upsert(live_docs())
        return answers(index)


def test_a_partial_copy_left_by_a_crash_is_dropped_on_open(tmp_path: Path, embedder_factory: type) -> None:
    folder = tmp_path / "ix"
    before = _index_with_docs(folder, embedder_factory)
    # A crash while copying: shard/ is still the one in use, shard.new/ half written.
    (folder / "shard.new" / "segments").mkdir(parents=True)
    (folder / "shard.new" / "junk").write_bytes(b"partial")
    (folder / "shard.old").mkdir()  # or a crash while removing the replaced shard
    with HybridIndex.open(folder, embedder=embedder_factory()) as index:
        assert answers(index) == before
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith("shard")) == ["shard"]


@pytest.mark.parametrize("left", ["both", "old only"])
def test_a_crash_between_the_two_renames_is_completed_on_open(
    tmp_path: Path, embedder_factory: type, left: str
) -> None:
    folder = tmp_path / "ix"
    before = _index_with_docs(folder, embedder_factory)
    # shard/ renamed away, the complete copy not yet renamed in: promote the copy (or, with no
    # copy, put the old shard back); never start an empty index over the data.
    if left == "both":
        shutil.copytree(folder / "shard", folder / "shard.new")
    (folder / "shard").rename(folder / "shard.old")
    with HybridIndex.open(folder, embedder=embedder_factory()) as index:
        assert index.count() == len(live_docs())
        assert answers(index) == before
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith("shard")) == ["shard"]


def test_a_failed_copy_leaves_the_shard_in_use(
    tmp_path: Path, embedder_factory: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "ix"
    with HybridIndex.open(folder, embedder=embedder_factory()) as index:
        index.upsert(live_docs())
        before = answers(index)

        def broken(*_: object) -> int:
            raise RuntimeError("disk full")

        monkeypatch.setattr(edge_backend, "_copy_live_points", broken)
        with pytest.raises(IndexUnavailable, match="compaction failed: disk full"):
            index.compact()
        assert not (folder / "shard.new").exists()
        assert answers(index) == before
        index.upsert([doomed()])  # still writable


def test_compaction_is_a_no_op_on_the_server_backend(embedder_factory: type) -> None:
    with HybridIndex.connect(":memory:", "c", embedder=embedder_factory()) as index:
        index.upsert(live_docs())
        before = answers(index)
        assert index.compact() == 0  # a Qdrant server vacuums deleted points itself
        assert answers(index) == before
