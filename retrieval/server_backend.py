"""The server backend: one collection on a Qdrant server or cluster, through qdrant-client.

Same data model as the embedded backend (named vectors `dense` and `bm25` with the IDF modifier,
tenant index on `tenant_id`, indexed filter fields, payload without text), so an index can move
between the two by re-ingesting, or by Qdrant snapshots. `QdrantClient(":memory:")` speaks the
same API in-process and is what the tests use; it is a reference implementation, slow past a
few thousand points.

The collection is created on first connect if missing; an existing collection must have the
same dense dimension (IndexConfigMismatch otherwise). Durability and optimisation are the
server's job, so `flush` and `optimize` are no-ops here: every write waits for the server's ack.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
from qdrant_client import QdrantClient
from qdrant_client import models as qm

from .backend import FLOAT_FIELDS, INTEGER_FIELDS, KEYWORD_FIELDS, Leg, LegQuery, ScoredPoint, StoredVectors
from .bm25 import SparseVector
from .errors import IndexConfigMismatch, IndexUnavailable
from .filters import AbsentOrKeywordIn, FilterSpec, KeywordIn, NumberRange
from .points import BM25, DENSE, IndexPoint, PointPayload
from .tuning import IndexTuning

T = TypeVar("T")


class ServerIndex:
    """A VectorIndex over one Qdrant collection."""

    def __init__(
        self,
        client: QdrantClient,
        collection: str,
        dense_dimension: int,
        tuning: IndexTuning | None = None,
    ) -> None:
        """Use (or create) `collection` through `client`.

        Raises IndexUnavailable if the server cannot be reached, IndexConfigMismatch if the
        collection exists with another dense dimension.
        """
        self._client: QdrantClient | None = client
        self._collection = collection
        self._dense_dimension = dense_dimension
        if self._call(lambda c: c.collection_exists(collection)):
            self._check_dimension()
        else:
            self._create(tuning or IndexTuning())

    @classmethod
    def connect(
        cls,
        url: str,
        collection: str,
        dense_dimension: int,
        *,
        api_key: str | None = None,
        tuning: IndexTuning | None = None,
    ) -> ServerIndex:
        """Connect to a server by URL (`http://host:6333`) or `:memory:` for an in-process engine."""
        try:
            client = (
                QdrantClient(location=url) if url == ":memory:" else QdrantClient(url=url, api_key=api_key)
            )
        except Exception as exc:
            raise IndexUnavailable(f"qdrant at {url}", str(exc)) from exc
        return cls(client, collection, dense_dimension, tuning)

    @property
    def description(self) -> str:
        return f"qdrant collection {self._collection!r}"

    @property
    def dense_dimension(self) -> int:
        return self._dense_dimension

    @property
    def owned_by_this_process(self) -> bool:
        return False  # every API process and worker may write the collection

    def _create(self, tuning: IndexTuning) -> None:
        hnsw = qm.HnswConfigDiff(
            m=tuning.hnsw_m,
            payload_m=tuning.hnsw_payload_m,
            ef_construct=tuning.hnsw_ef_construct,
            full_scan_threshold=tuning.full_scan_threshold_kb,
        )

        def create(c: QdrantClient) -> None:
            c.create_collection(
                self._collection,
                vectors_config={
                    DENSE: qm.VectorParams(size=self._dense_dimension, distance=qm.Distance.COSINE)
                },
                sparse_vectors_config={BM25: qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
                hnsw_config=hnsw,
            )
            c.create_payload_index(
                self._collection,
                "tenant_id",
                qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True),
            )
            # Only the tenant index shapes HNSW (see edge_backend._create_payload_indexes).
            for name in KEYWORD_FIELDS:
                keyword = qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, enable_hnsw=False)
                c.create_payload_index(self._collection, name, keyword)
            for name in INTEGER_FIELDS:
                integer = qm.IntegerIndexParams(
                    type=qm.IntegerIndexType.INTEGER, lookup=True, range=True, enable_hnsw=False
                )
                c.create_payload_index(self._collection, name, integer)
            for name in FLOAT_FIELDS:
                number = qm.FloatIndexParams(type=qm.FloatIndexType.FLOAT, enable_hnsw=False)
                c.create_payload_index(self._collection, name, number)

        with warnings.catch_warnings():
            # In-process mode says payload indexes have no effect there; they do on a server.
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")
            self._call(create)

    def _check_dimension(self) -> None:
        info = self._call(lambda c: c.get_collection(self._collection))
        vectors = info.config.params.vectors
        stored = vectors.get(DENSE) if isinstance(vectors, dict) else None
        if stored is None or stored.size != self._dense_dimension:
            raise IndexConfigMismatch(
                self.description,
                "dense_dimension",
                None if stored is None else stored.size,
                self._dense_dimension,
            )

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if not points:
            return
        structs = [
            qm.PointStruct(
                id=str(p.id),
                vector={
                    DENSE: p.dense.tolist(),
                    BM25: qm.SparseVector(indices=list(p.sparse.indices), values=list(p.sparse.values)),
                },
                payload=p.payload.to_dict(),
            )
            for p in points
        ]
        self._call(lambda c: c.upsert(self._collection, points=structs, wait=True))

    def delete_ids(self, ids: Sequence[uuid.UUID]) -> None:
        if ids:
            selector = qm.PointIdsList(points=[str(i) for i in ids])
            self._call(lambda c: c.delete(self._collection, points_selector=selector, wait=True))

    def delete_matching(self, spec: FilterSpec) -> None:
        selector = qm.FilterSelector(filter=_filter(spec))
        self._call(lambda c: c.delete(self._collection, points_selector=selector, wait=True))

    def set_payload_matching(self, spec: FilterSpec, values: dict[str, Any]) -> None:
        self._call(lambda c: c.set_payload(self._collection, payload=values, points=_filter(spec), wait=True))

    def set_payloads(self, payloads: Mapping[uuid.UUID, PointPayload]) -> None:
        if not payloads:
            return
        operations: list[qm.UpdateOperation] = [
            qm.OverwritePayloadOperation(
                overwrite_payload=qm.SetPayload(payload=p.to_dict(), points=[str(pid)])
            )
            for pid, p in payloads.items()
        ]
        self._call(lambda c: c.batch_update_points(self._collection, update_operations=operations, wait=True))

    def query(self, legs: Sequence[LegQuery]) -> list[list[ScoredPoint]]:
        if not legs:
            return []
        requests = [_request(leg) for leg in legs]
        responses = self._call(lambda c: c.query_batch_points(self._collection, requests=requests))
        return [[ScoredPoint(_uuid(p.id), float(p.score)) for p in r.points] for r in responses]

    def payloads(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, PointPayload]:
        if not ids:
            return {}
        records = self._call(
            lambda c: c.retrieve(
                self._collection, ids=[str(i) for i in ids], with_payload=True, with_vectors=False
            )
        )
        return {_uuid(r.id): PointPayload.from_dict(r.payload or {}) for r in records}

    def vectors(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, StoredVectors]:
        if not ids:
            return {}
        records = self._call(
            lambda c: c.retrieve(
                self._collection, ids=[str(i) for i in ids], with_payload=False, with_vectors=[DENSE, BM25]
            )
        )
        return {_uuid(r.id): StoredVectors.from_named(r.vector) for r in records}

    def matching(self, spec: FilterSpec, limit: int = 10_000) -> list[tuple[uuid.UUID, PointPayload]]:
        records, _ = self._call(
            lambda c: c.scroll(self._collection, scroll_filter=_filter(spec), limit=limit, with_payload=True)
        )
        return [(_uuid(r.id), PointPayload.from_dict(r.payload or {})) for r in records]

    def count(self, spec: FilterSpec | None = None) -> int:
        flt = None if spec is None else _filter(spec)
        return self._call(lambda c: c.count(self._collection, count_filter=flt, exact=True).count)

    def flush(self) -> None:
        self._call(lambda c: None)  # writes were acknowledged with wait=True; only check we are open

    def optimize(self) -> None:
        self._call(lambda c: None)  # the server optimises in the background

    def compact(self) -> int:
        """Nothing to do: a Qdrant server vacuums deleted points itself (its optimizer rewrites
        a segment once its deleted share passes `deleted_threshold`); returns 0."""
        self._call(lambda c: None)
        return 0

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def _call(self, operation: Callable[[QdrantClient], T]) -> T:
        if self._client is None:
            raise IndexUnavailable(self.description, "closed")
        try:
            return operation(self._client)
        except IndexConfigMismatch:
            raise
        except Exception as exc:
            # qdrant-client raises transport, HTTP, gRPC and validation errors alike; name the engine.
            raise IndexUnavailable(self.description, str(exc)) from exc


def _filter(spec: FilterSpec) -> qm.Filter:
    must: list[qm.Condition] = []
    for clause in spec.clauses:
        if isinstance(clause, KeywordIn):
            must.append(qm.FieldCondition(key=clause.field, match=_match(clause.values)))
        elif isinstance(clause, AbsentOrKeywordIn):
            must.append(
                qm.Filter(
                    should=[
                        qm.IsEmptyCondition(is_empty=qm.PayloadField(key=clause.field)),
                        qm.FieldCondition(key=clause.field, match=_match(clause.values)),
                    ]
                )
            )
        else:
            assert isinstance(clause, NumberRange)
            bounds = qm.Range(gte=clause.gte, gt=clause.gt, lte=clause.lte, lt=clause.lt)
            must.append(qm.FieldCondition(key=clause.field, range=bounds))
    return qm.Filter(must=must)


def _match(values: tuple[str, ...]) -> qm.MatchValue | qm.MatchAny:
    return qm.MatchValue(value=values[0]) if len(values) == 1 else qm.MatchAny(any=list(values))


def _request(leg: LegQuery) -> qm.QueryRequest:
    if leg.leg is Leg.DENSE:
        assert isinstance(leg.vector, np.ndarray)
        return qm.QueryRequest(
            query=leg.vector.tolist(),
            using=DENSE,
            filter=_filter(leg.filter),
            limit=leg.limit,
            with_payload=False,
        )
    assert isinstance(leg.vector, SparseVector)
    params = None
    if leg.idf_corpus is not None:
        params = qm.SearchParams(idf=qm.IdfCorpusParams(corpus=_filter(leg.idf_corpus)))
    return qm.QueryRequest(
        query=qm.SparseVector(indices=list(leg.vector.indices), values=list(leg.vector.values)),
        using=BM25,
        filter=_filter(leg.filter),
        limit=leg.limit,
        with_payload=False,
        params=params,
    )


def _uuid(value: object) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
