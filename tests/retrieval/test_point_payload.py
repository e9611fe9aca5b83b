"""PointPayload's faster constructor and `to_dict`, `prepare`'s payloads, and `edge_points`
handing Edge the sparse vector's tuples: the same payloads, dataclass behaviour and stored
vectors as before."""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import qdrant_edge as qe
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo_sea.retrieval.bm25 import SparseVector
from mnemo_sea.retrieval.chunking import ChunkingPolicy, split_into_chunks
from mnemo_sea.retrieval.edge_backend import EdgeIndex, edge_points
from mnemo_sea.retrieval.evidence import EvidenceDocument
from mnemo_sea.retrieval.fields import BEGINNING_OF_TIME, END_OF_TIME
from mnemo_sea.retrieval.ingest import PointEncoder
from mnemo_sea.retrieval.points import BM25, DENSE, POINT_NAMESPACE, IndexPoint, PointPayload
from mnemo_sea.retrieval.settings import EncodingSettings

KEYS = [f.name for f in dataclasses.fields(PointPayload)]


def reference_to_dict(payload: PointPayload) -> dict[str, Any]:
    """`to_dict` as it was: every field read in declaration order, an absent owner left out."""
    data = {name: getattr(payload, name) for name in KEYS}
    if payload.owner is None:
        del data["owner"]
    return data


texts = st.text(max_size=20)
payloads = st.builds(
    PointPayload,
    tenant_id=texts,
    evidence_id=texts,
    version=st.integers(0, 2**40),
    chunk=st.integers(0, 1000),
    chunk_start=st.integers(0, 10**6),
    chunk_end=st.integers(0, 10**6),
    chunk_sha256=texts,
    content_sha256=texts,
    kind=texts,
    scope=texts,
    source=texts,
    owner=st.none() | texts,
    sensitivity=st.integers(0, 4),
    status=texts,
    valid_from=st.floats(allow_nan=False),
    valid_until=st.floats(allow_nan=False),
)


@settings(max_examples=200, deadline=None)
@given(payloads)
def test_to_dict_is_the_old_one_keys_in_order(payload: PointPayload) -> None:
    data = payload.to_dict()
    assert data == reference_to_dict(payload)
    assert list(data) == list(reference_to_dict(payload))
    assert PointPayload.from_dict(data) == payload
    data["tenant_id"] = "changed"  # a copy: the payload is untouched
    assert payload.to_dict() == reference_to_dict(payload)


@settings(max_examples=100, deadline=None)
@given(payloads)
def test_the_constructor_keeps_the_dataclass_behaviour(payload: PointPayload) -> None:
    values = {name: getattr(payload, name) for name in KEYS}
    by_position = PointPayload(*values.values())
    assert by_position == payload
    assert hash(by_position) == hash(payload)
    assert dataclasses.astuple(by_position) == tuple(values.values())
    assert repr(payload) == f"PointPayload({', '.join(f'{k}={v!r}' for k, v in values.items())})"
    assert dataclasses.replace(payload, chunk=payload.chunk + 1) != payload
    with pytest.raises(dataclasses.FrozenInstanceError):
        payload.chunk = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        PointPayload(*list(values.values())[:-1])  # type: ignore[call-arg]


def test_edge_stores_the_sparse_tuples_as_it_stored_lists(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    payload = PointPayload(
        "t", "e", 1, 0, 0, 10, "a", "b", "knowledge", "s", "src", None, 0, "active", 0.0, 1.0
    )
    indices = tuple(sorted({int(i) for i in rng.integers(0, 2**32, 40)}))
    sparse = SparseVector(indices, tuple(float(v) for v in rng.random(len(indices))))
    dense = rng.random(8).astype(np.float32)
    new_id, old_id = uuid.uuid4(), uuid.uuid4()
    (new_point,) = edge_points([IndexPoint(new_id, payload, dense, sparse)])
    old_point = qe.Point(
        old_id,
        {DENSE: dense.tolist(), BM25: qe.SparseVector(list(sparse.indices), list(sparse.values))},
        payload.to_dict(),
    )
    index = EdgeIndex.open(tmp_path / "index", 8)
    try:
        index.upsert_edge_points([new_point, old_point])
        stored = index.vectors([new_id, old_id])
    finally:
        index.close()
    # Edge keeps sparse values as float32: the same ones either way.
    assert stored[new_id].sparse.indices == stored[old_id].sparse.indices == sparse.indices
    new_values, old_values = stored[new_id].sparse.values, stored[old_id].sparse.values
    assert [v.hex() for v in new_values] == [v.hex() for v in old_values]
    assert np.array_equal(np.float32(new_values), np.float32(sparse.values))
    assert np.array_equal(stored[new_id].dense, stored[old_id].dense)


class _NoEmbedder:
    dimension = 4
    model_id = "none"


@settings(max_examples=150, deadline=None)
@given(
    st.text(max_size=300).filter(str.strip) | st.sampled_from(["a b c", " padded ", "x" * 5000]),
    st.sampled_from(["", "tool: search(q)"]),
    st.sampled_from([30, 2000]),
)
def test_prepared_payloads_are_the_old_ones(text: str, heading: str, max_chars: int) -> None:
    """`prepare` takes a whole-text chunk's hash from the document: the payload is still the one
    built field by field from the chunk, its hash that of the searched text."""
    encoding = EncodingSettings(chunking=ChunkingPolicy(max_chars=max_chars, overlap_chars=10))
    doc = EvidenceDocument(
        tenant_id="t1", evidence_id="e:1", version=2, text=text, heading=heading, owner="u1"
    )
    prepared = PointEncoder(encoding, _NoEmbedder()).prepare(doc)  # type: ignore[arg-type]
    assert [p.chunk for p in prepared] == list(split_into_chunks(text, encoding.chunking))
    for p in prepared:
        searched = f"{heading}\n{p.chunk.text}" if heading else p.chunk.text
        assert p.searched == searched
        assert p.point_id == uuid.uuid5(POINT_NAMESPACE, f"t1\x1fe:1\x1f2\x1f{p.chunk.index}")
        assert p.payload == PointPayload(
            tenant_id="t1",
            evidence_id="e:1",
            version=2,
            chunk=p.chunk.index,
            chunk_start=p.chunk.start,
            chunk_end=p.chunk.end,
            chunk_sha256=hashlib.sha256(searched.encode("utf-8")).hexdigest(),
            content_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
            kind="knowledge",
            scope="default",
            source="unknown",
            owner="u1",
            sensitivity=0,
            status="active",
            valid_from=BEGINNING_OF_TIME,
            valid_until=END_OF_TIME,
        )
