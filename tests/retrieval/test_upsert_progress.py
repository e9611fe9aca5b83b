"""An upsert's progress: the chunk total before the model starts, then each embedding step, each
document reported once, when every chunk of it is in the index; no steps when nobody watches."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from mnemo_sea.retrieval import EvidenceDocument, HybridIndex, UpsertProgress
from mnemo_sea.retrieval.filters import evidence_filter

PARAGRAPH = "The carrier reroutes delayed parcels through the northern hub when the bridge is closed. "


def doc(evidence_id: str, text: str, **fields: Any) -> EvidenceDocument:
    return EvidenceDocument(tenant_id="acme", evidence_id=evidence_id, version=1, text=text, **fields)


def sized(evidence_id: str, paragraphs: int) -> EvidenceDocument:
    """A document of about `paragraphs` × 90 characters (a chunk holds up to 2,000)."""
    return doc(evidence_id, f"{evidence_id}. " + PARAGRAPH * paragraphs)


def chunks_of(index: HybridIndex, document: EvidenceDocument) -> int:
    return len(index.encoder.prepare(document))


def test_the_total_comes_first_then_each_step_and_a_document_once_all_its_chunks_are_written(
    edge_index: HybridIndex, embedder: Any
) -> None:
    index = edge_index
    index.embed_step = 2
    unchanged = sized("unchanged", 10)
    relabelled = sized("relabelled", 10)
    index.upsert([unchanged, relabelled])
    before = embedder.documents_embedded
    # Fresh documents of 1 to 3 chunks, one indexed already, one whose text is indexed already
    # (only its scope changed: a payload update, no model).
    docs = [
        sized("a", 60),
        unchanged,
        sized("b", 10),
        doc("relabelled", relabelled.text, scope="moved"),
        sized("c", 30),
        sized("d", 5),
    ]
    fresh = [d for d in docs if d.evidence_id not in ("unchanged", "relabelled")]
    seen: list[tuple[UpsertProgress, int, dict[int, int]]] = []

    def watch(p: UpsertProgress) -> None:
        # What the index holds of each reported document at the moment it is reported.
        points = {i: index.count_matching(evidence_filter("acme", docs[i].evidence_id, 1)) for i in p.written}
        seen.append((p, embedder.documents_embedded - before, points))

    report = index.upsert(docs, progress=watch)

    total = sum(chunks_of(index, d) for d in fresh)
    assert total > len(fresh)  # some document has several chunks: a step may end inside one
    assert report.written == total
    first, model_calls_then, _ = seen[0]
    assert first == UpsertProgress(total, 0, ()) and model_calls_then == 0
    # The two documents that needed no model are written before the model starts.
    p, model_calls_then, _ = seen[1]
    assert (p.embedded, sorted(p.written), model_calls_then) == (0, [1, 3], 0)
    steps = [p.embedded for p, _, _ in seen]
    assert steps == sorted(steps) and steps[-1] == total
    assert all(0 < b - a <= 2 for a, b in pairwise(steps[1:]))  # after the model-free report
    assert len(seen) == 2 + -(-total // 2)  # the total, the model-free writes, one per step
    written = [i for p, _, _ in seen for i in p.written]
    assert sorted(written) == list(range(len(docs)))  # every document once
    for _, _, points in seen:
        for i, held in points.items():
            assert held == chunks_of(index, docs[i]), docs[i].evidence_id
    # Documents are reported as they are done, not all at the end; a step inside a document of
    # several chunks reports its chunks with no document.
    assert len({p.embedded for p, _, points in seen if points}) > 2
    assert any(not p.written for p, _, _ in seen[2:])


def test_without_a_listener_a_batch_is_embedded_in_one_call(
    edge_index: HybridIndex, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    edge_index.embed_step = 2
    calls: list[int] = []
    embed = embedder.embed_documents
    monkeypatch.setattr(embedder, "embed_documents", lambda texts: calls.append(len(texts)) or embed(texts))

    edge_index.upsert([sized("a", 60), sized("b", 30)])
    assert len(calls) == 1 and calls[0] > 2

    calls.clear()
    edge_index.upsert([sized("c", 60), sized("d", 30)], progress=lambda p: None)
    assert len(calls) > 1 and max(calls) <= 2


def test_an_embedding_step_must_be_positive(embedder: Any) -> None:
    from mnemo_sea.retrieval import EncodingSettings

    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="embed_step"):
            HybridIndex(None, embedder, EncodingSettings(), embed_step=bad)  # type: ignore[arg-type]
