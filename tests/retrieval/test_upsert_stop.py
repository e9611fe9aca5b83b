"""An upsert that may be stopped between documents (`HybridIndex.upsert(stop=)`, what the indexer's
trail hands a few pages to): documents embedded one at a time, `stop` asked before each but the
first that needs the model, what was embedded written once the embedding stops (a document's
a write), the report counting the documents written, always the first ones; the rest written by
a later call as if never cut."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mnemo_sea.retrieval import EvidenceDocument, HybridIndex
from mnemo_sea.retrieval.filters import evidence_filter, tenant_filter

PARAGRAPH = "The carrier reroutes delayed parcels through the northern hub when the bridge is closed. "


def sized(evidence_id: str, paragraphs: int, **fields: Any) -> EvidenceDocument:
    """A document of about `paragraphs` x 90 characters (a chunk holds up to 2,000)."""
    text = f"{evidence_id}. " + PARAGRAPH * paragraphs
    return EvidenceDocument(tenant_id="acme", evidence_id=evidence_id, version=1, text=text, **fields)


def chunks_of(index: HybridIndex, document: EvidenceDocument) -> int:
    return len(index.encoder.prepare(document))


def held(index: HybridIndex, document: EvidenceDocument) -> int:
    """The points the index holds of `document`."""
    return index.count_matching(evidence_filter("acme", document.evidence_id, 1))


def stored(index: HybridIndex) -> set[tuple[Any, ...]]:
    """Every point of the tenant as its payload's fields (spans, hashes, labels)."""
    return {tuple(sorted(p.to_dict().items())) for p in index.points_matching(tenant_filter("acme"))}


class Writes:
    """The backend's point writes (`VectorIndex.upsert` calls), each as its points, and the
    documents embedded when each came."""

    def __init__(self, index: HybridIndex, embedder: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[int] = []
        self.embedded_then: list[int] = []
        upsert = index.backend.upsert

        def counted(points: Any) -> None:
            self.calls.append(len(points))
            self.embedded_then.append(embedder.documents_embedded)
            upsert(points)

        monkeypatch.setattr(index.backend, "upsert", counted)


@pytest.mark.parametrize("batch_size", [1024, 1])  # one plan, or a plan per document
def test_a_stop_ends_the_call_after_the_document_under_way_and_what_was_embedded_is_written(
    index: HybridIndex,
    embedder: Any,
    tmp_path: Path,
    embedder_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    batch_size: int,
) -> None:
    docs = [sized("a", 60), sized("b", 10), sized("c", 30), sized("d", 5)]
    sizes = [chunks_of(index, d) for d in docs]
    assert sizes[0] > 1 and sizes[2] > 1  # documents of several chunks
    asked: list[int] = []  # the documents embedded at each ask

    def stop() -> bool:
        asked.append(embedder.documents_embedded)
        return len(asked) == 2  # go on before the second document, stop before the third

    writes = Writes(index, embedder, monkeypatch)
    report = index.upsert(docs, stop=stop, batch_size=batch_size)

    assert asked == [sizes[0], sizes[0] + sizes[1]]  # asked after each document, not before the first
    assert (report.documents, report.chunks, report.written) == (2, sizes[0] + sizes[1], sizes[0] + sizes[1])
    assert embedder.documents_embedded == sizes[0] + sizes[1]  # nothing embedded past the stop
    assert writes.calls == sizes[:2]  # a write per document,
    assert writes.embedded_then == [sizes[0] + sizes[1]] * 2  # once the embedding stopped
    assert [held(index, d) for d in docs] == [sizes[0], sizes[1], 0, 0]

    rest = index.upsert(docs[report.documents :], stop=lambda: False)
    assert (rest.documents, rest.written) == (2, sizes[2] + sizes[3])
    assert writes.calls == sizes
    # Cut in two, the documents are stored exactly as one plain upsert stores them, each chunk
    # with its own vectors (the sparse ones are encoded for the call's documents before any is
    # embedded, the dense ones a document at a time).
    whole = HybridIndex.open(tmp_path / "whole", embedder=embedder_factory())
    try:
        whole.upsert(docs)
        assert stored(index) == stored(whole) and len(stored(whole)) == sum(sizes)
        ids = [pid for pid, _ in whole.backend.matching(tenant_filter("acme"))]
        cut, plain = index.backend.vectors(ids), whole.backend.vectors(ids)
        assert len(ids) == sum(sizes) and set(cut) == set(plain) == set(ids)
        for pid in ids:
            assert cut[pid].sparse.indices == plain[pid].sparse.indices, pid
            assert np.allclose(cut[pid].sparse.values, plain[pid].sparse.values), pid
            assert np.allclose(cut[pid].dense, plain[pid].dense, atol=1e-6), pid
    finally:
        whole.close()


def test_the_first_document_is_written_however_soon_stop_answers(index: HybridIndex, embedder: Any) -> None:
    docs = [sized("a", 30), sized("b", 10)]
    asked: list[int] = []

    def stop() -> bool:
        asked.append(1)
        return True

    report = index.upsert(docs, stop=stop)
    assert asked == [1]  # once, before the second document
    assert report.documents == 1 and held(index, docs[0]) == chunks_of(index, docs[0])
    assert held(index, docs[1]) == 0 and embedder.documents_embedded == chunks_of(index, docs[0])


def test_documents_needing_no_model_are_written_first_without_asking(
    index: HybridIndex, embedder: Any
) -> None:
    """A document stored already, or whose text is (a payload update), needs no embedding: it is
    written with the call's other such writes before the model starts, and counted when it comes
    before the stop."""
    unchanged, relabelled = sized("unchanged", 10), sized("relabelled", 10)
    index.upsert([unchanged, relabelled])
    before = embedder.documents_embedded
    moved = EvidenceDocument("acme", "relabelled", 1, relabelled.text, scope="moved")
    docs = [unchanged, sized("a", 30), moved, sized("b", 10)]
    asked: list[int] = []

    def stop() -> bool:
        asked.append(1)
        return True

    report = index.upsert(docs, stop=stop)

    assert asked == [1]  # before "b" only: neither the unchanged nor the relabelled one asked
    assert report.documents == 3  # unchanged, a, relabelled; b left for a later call
    assert report.chunks == sum(chunks_of(index, d) for d in docs[:3])
    assert (report.unchanged, report.payload_updates) == (
        chunks_of(index, unchanged),
        chunks_of(index, moved),
    )
    assert embedder.documents_embedded - before == chunks_of(index, docs[1])
    assert {p.scope for p in index.points_matching(evidence_filter("acme", "relabelled", 1))} == {"moved"}
    assert held(index, docs[3]) == 0


def test_progress_and_stop_are_not_taken_together(index: HybridIndex, embedder: Any) -> None:
    with pytest.raises(ValueError, match=r"progress.*stop"):
        index.upsert([sized("a", 10)], progress=lambda p: None, stop=lambda: False)
    assert embedder.documents_embedded == 0 and held(index, sized("a", 10)) == 0


@pytest.mark.parametrize("batch_size", [1024, 1])
def test_a_document_needing_no_model_after_the_stop_is_not_counted_written(
    index: HybridIndex, batch_size: int
) -> None:
    """The report stays a prefix: an unchanged document behind the stop is left to a later call
    like the rest, even though it needed nothing (the trail counts pages done from it)."""
    unchanged = sized("unchanged", 10)
    index.upsert([unchanged])
    docs = [sized("a", 30), sized("b", 10), unchanged]
    report = index.upsert(docs, stop=lambda: True, batch_size=batch_size)
    assert report.documents == 1 and report.chunks == chunks_of(index, docs[0])
    assert held(index, docs[1]) == 0
