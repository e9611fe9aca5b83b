"""The embedded backend: one Qdrant Edge shard in a directory, in this process.

Layout of the directory: `shard/` (Qdrant Edge's segments and WAL) and `LOCK` (see lock.py).
Opening takes the lock first, then loads the shard (or creates it with the shared data model),
so a second opener gets IndexLocked naming the holder instead of Edge's bare WAL error.

Writes go to Edge's write-ahead log (which a killed process leaves readable: the next load
replays it; measured with SIGKILL); `flush()` makes them durable in the segments, `optimize()`
builds the HNSW graphs and merges segments after a bulk load (Edge never optimises by itself;
unindexed points are still found, by brute force). A flush costs tens to hundreds of
milliseconds even when nothing changed, so `flush()` and `close()` skip it when nothing was
written since the last one (`dirty`).

A deleted point only gets a tombstone: its vectors and payload strings stay in the segment
files, the payload index maps and the WAL, even after flush() and optimize() (measured).
`compact()` rewrites the shard with the live points only into `shard.new/`, then swaps it in
(`shard/` -> `shard.old/`, `shard.new/` -> `shard/`, `shard.old/` removed), all under the lock.
Opening finishes or undoes a swap a crash interrupted (see `_recover_swap`).

Vector layout for multi-tenancy: every search filters on one tenant, so there is no global
HNSW graph (m=0); Qdrant builds one graph per tenant instead (payload_m on the tenant index),
and a tenant small enough is scanned exactly (full_scan_threshold_kb).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import qdrant_edge as qe

from .backend import FLOAT_FIELDS, INTEGER_FIELDS, KEYWORD_FIELDS, Leg, LegQuery, ScoredPoint, StoredVectors
from .bm25 import SparseVector
from .errors import IndexUnavailable
from .filters import AbsentOrKeywordIn, FilterSpec, KeywordIn, NumberRange
from .lock import IndexLock
from .points import BM25, DENSE, IndexPoint, PointPayload
from .tuning import IndexTuning

T = TypeVar("T")

SHARD = "shard"
NEW_SHARD = "shard.new"  # compaction's copy while it is written
OLD_SHARD = "shard.old"  # the replaced shard between the two renames of a swap
CONFIG_FILE = "edge_config.json"
COPY_PAGE = 512  # points read and written per step of a compaction


class EdgeIndex:
    """A VectorIndex over a Qdrant Edge shard; see the module docstring for layout and locking."""

    def __init__(self, directory: Path, shard: qe.EdgeShard, lock: IndexLock, dense_dimension: int) -> None:
        self._directory = directory
        self._shard: qe.EdgeShard | None = shard
        self._lock = lock
        self._dense_dimension = dense_dimension
        # Whether anything was written since the last flush (a new shard's payload indexes are).
        self.dirty = False

    @classmethod
    def open(
        cls,
        directory: str | Path,
        dense_dimension: int,
        tuning: IndexTuning | None = None,
        *,
        lock: IndexLock | None = None,
    ) -> EdgeIndex:
        """Open (or create) the index in `directory`.

        `lock`: the directory's lock, already acquired by the caller (who read other files under
        it); taken here when None. The index releases it on close.
        Raises IndexLocked when another opener holds it, IndexUnavailable when Edge cannot load it.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if lock is None:
            lock = IndexLock(directory)
            lock.acquire()
        shard_dir = directory / SHARD
        try:
            _recover_swap(directory)
            if (shard_dir / CONFIG_FILE).exists():
                shard = qe.EdgeShard.load(str(shard_dir))
            else:
                shard = qe.EdgeShard.create(str(shard_dir), _config(dense_dimension, tuning or IndexTuning()))
                _create_payload_indexes(shard)
                # Flushed at once: until a flush the payload indexes live in the WAL only, and
                # every load would replay them.
                shard.flush()
        except Exception as exc:
            lock.release()
            raise IndexUnavailable(f"qdrant-edge at {directory}", str(exc)) from exc
        return cls(directory, shard, lock, dense_dimension)

    @property
    def description(self) -> str:
        return f"qdrant-edge at {self._directory}"

    @property
    def dense_dimension(self) -> int:
        return self._dense_dimension

    @property
    def owned_by_this_process(self) -> bool:
        return True  # the directory lock (lock.py) admits one opener

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if points:
            self.upsert_edge_points(edge_points(points))

    def upsert_edge_points(self, points: Sequence[qe.Point]) -> None:
        """Upsert points already in Edge's form (`edge_points`): `upsert` without the conversion,
        which a benchmark does ahead to time Edge's own writes."""
        if points:
            batch = list(points)
            self._write(lambda s: s.update(qe.UpdateOperation.upsert_points(batch)))

    def delete_ids(self, ids: Sequence[uuid.UUID]) -> None:
        if ids:
            point_ids: list[qe.PointId] = list(ids)
            self._write(lambda s: s.update(qe.UpdateOperation.delete_points(point_ids)))

    def delete_matching(self, spec: FilterSpec) -> None:
        self._write(lambda s: s.update(qe.UpdateOperation.delete_points_by_filter(_filter(spec))))

    def set_payload_matching(self, spec: FilterSpec, values: dict[str, Any]) -> None:
        self._write(lambda s: s.update(qe.UpdateOperation.set_payload_by_filter(_filter(spec), values)))

    def set_payloads(self, payloads: Mapping[uuid.UUID, PointPayload]) -> None:
        def apply(shard: qe.EdgeShard) -> None:
            for pid, payload in payloads.items():
                shard.update(qe.UpdateOperation.overwrite_payload([pid], payload.to_dict()))

        self._write(apply)

    def query(self, legs: Sequence[LegQuery]) -> list[list[ScoredPoint]]:
        if not legs:
            return []
        requests = [_request(leg) for leg in legs]
        batches = self._call(lambda s: s.query_batch(qe.QueryBatchRequest(requests)))
        return [[ScoredPoint(_uuid(p.id), float(p.score)) for p in batch] for batch in batches]

    def payloads(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, PointPayload]:
        if not ids:
            return {}
        point_ids: list[qe.PointId] = list(ids)
        records = self._call(lambda s: s.retrieve(point_ids, with_payload=True, with_vector=False))
        return {_uuid(r.id): PointPayload.from_dict(r.payload or {}) for r in records}

    def vectors(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, StoredVectors]:
        if not ids:
            return {}
        point_ids: list[qe.PointId] = list(ids)
        records = self._call(lambda s: s.retrieve(point_ids, with_payload=False, with_vector=True))
        return {_uuid(r.id): StoredVectors.from_named(r.vector) for r in records}

    def matching(self, spec: FilterSpec, limit: int = 10_000) -> list[tuple[uuid.UUID, PointPayload]]:
        request = qe.ScrollRequest(limit=limit, filter=_filter(spec), with_payload=True, with_vector=False)
        records, _ = self._call(lambda s: s.scroll(request))
        return [(_uuid(r.id), PointPayload.from_dict(r.payload or {})) for r in records]

    def count(self, spec: FilterSpec | None = None) -> int:
        request = qe.CountRequest(exact=True, filter=None if spec is None else _filter(spec))
        return self._call(lambda s: s.count(request))

    def flush(self) -> None:
        """Make every write durable in the segments; nothing to do when nothing was written."""
        if self.dirty:
            self._call(lambda s: s.flush())
            self.dirty = False
        else:
            self._call(lambda s: None)  # still fails on a closed index

    def optimize(self) -> None:
        self._write(lambda s: s.optimize())

    def compact(self) -> int:
        """Rewrite the shard with only its live points, so nothing of a deleted point stays in
        the index files; returns the number of points copied.

        Ids, both named vectors, payloads, the shard's on-disk config and the payload indexes are
        carried over, so searches answer the same. The lock stays held throughout. A failure
        before the swap leaves the current shard in use and removes the partial copy; a crash
        is repaired by the next open. Costs a full copy: see docs/operations.md.
        """
        shard = self._shard
        if shard is None:
            raise IndexUnavailable(self.description, "closed")
        new_dir = self._directory / NEW_SHARD
        try:
            shard.flush()
            self.dirty = False
            shutil.rmtree(new_dir, ignore_errors=True)
            new_dir.mkdir()
            # The stored config, not today's tuning: a compaction must not re-tune the shard.
            shutil.copyfile(self._directory / SHARD / CONFIG_FILE, new_dir / CONFIG_FILE)
            copied = _copy_live_points(shard, new_dir)
        except Exception as exc:
            shutil.rmtree(new_dir, ignore_errors=True)
            raise IndexUnavailable(self.description, f"compaction failed: {exc}") from exc
        self._shard = None
        try:
            shard.close()
            _swap_in(self._directory)
            self._shard = qe.EdgeShard.load(str(self._directory / SHARD))
        except Exception as exc:
            # Whichever complete shard is on disk is put back in place and reopened; if even
            # that fails the index stays closed (calls raise IndexUnavailable) and the next
            # open repairs the directory.
            reason = f"compaction failed: {exc}"
            try:
                _recover_swap(self._directory)
                self._shard = qe.EdgeShard.load(str(self._directory / SHARD))
            except Exception as again:  # noqa: BLE001 - reported in the error raised below
                reason += f"; reopening failed too: {again}"
            raise IndexUnavailable(self.description, reason) from exc
        return copied

    def close(self) -> None:
        """Flush (if anything was written) and release the shard and the lock; closing twice is
        harmless."""
        shard, self._shard = self._shard, None
        try:
            if shard is not None:
                if self.dirty:
                    shard.flush()
                    self.dirty = False
                shard.close()
        finally:
            self._lock.release()  # idempotent; also after a compaction that could not reopen

    def _write(self, operation: Callable[[qe.EdgeShard], T]) -> T:
        """`_call` of an operation that changes the shard: the next flush has work to do. Set
        before the call, so a write that failed half-way is flushed too."""
        self.dirty = True
        return self._call(operation)

    def _call(self, operation: Callable[[qe.EdgeShard], T]) -> T:
        if self._shard is None:
            raise IndexUnavailable(self.description, "closed")
        try:
            return operation(self._shard)
        except Exception as exc:
            # Edge raises bare Exception for every engine error; name the engine and keep the cause.
            raise IndexUnavailable(self.description, str(exc)) from exc


def edge_points(points: Sequence[IndexPoint]) -> list[qe.Point]:
    """Index points in Edge's form. Edge converts each payload value on the way in (about 3 us a
    string or float, 1 us an int; a PointPayload comes to ~35 us), a dense row of 384 floats
    costs ~8 us with `tolist()` (a numpy row is accepted but costs ~16 us). The sparse vector's
    tuples go in as they are: Edge takes any sequence (0.66 us against 0.85 copying them to
    lists first, a 40-term vector, timeit).
    """
    return [
        qe.Point(
            p.id,
            {
                DENSE: p.dense.tolist(),
                # The stub says list; the binding's Vec extraction takes any sequence.
                BM25: qe.SparseVector(p.sparse.indices, p.sparse.values),  # type: ignore[arg-type]
            },
            p.payload.to_dict(),
        )
        for p in points
    ]


def _config(dense_dimension: int, tuning: IndexTuning) -> qe.EdgeConfig:
    hnsw = qe.HnswIndexConfig(
        m=tuning.hnsw_m,
        ef_construct=tuning.hnsw_ef_construct,
        full_scan_threshold=tuning.full_scan_threshold_kb,
        payload_m=tuning.hnsw_payload_m,
    )
    return qe.EdgeConfig(
        vectors={DENSE: qe.EdgeVectorParams(size=dense_dimension, distance=qe.Distance.Cosine)},
        sparse_vectors={BM25: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        hnsw_config=hnsw,
        payload_memory=qe.Memory.Cached,
    )


def _copy_live_points(source: qe.EdgeShard, new_dir: Path) -> int:
    """Copy every live point of `source` into a new shard at `new_dir` (holding the config file
    only), flush and close it; returns the number copied. Raises if the counts differ."""
    target = qe.EdgeShard.load(str(new_dir))
    try:
        _create_payload_indexes(target)
        copied = 0
        offset: qe.PointId | None = None
        while True:
            request = qe.ScrollRequest(offset=offset, limit=COPY_PAGE, with_payload=True, with_vector=True)
            records, offset = source.scroll(request)
            points = [qe.Point(r.id, r.vector or {}, r.payload or {}) for r in records]
            if points:
                target.update(qe.UpdateOperation.upsert_points(points))
                copied += len(points)
            if offset is None:
                break
        expected = source.count(qe.CountRequest(exact=True))
        if target.count(qe.CountRequest(exact=True)) != expected or copied != expected:
            raise RuntimeError(f"copied {copied} points of {expected}")
        # Copied points land unindexed; rebuild the HNSW graphs the old shard had (optimize() is
        # not run otherwise: it costs as much as the copy and an unoptimised shard never had them).
        if target.info().indexed_vectors_count < source.info().indexed_vectors_count:
            target.optimize()
        target.flush()
    finally:
        target.close()
    return copied


def _swap_in(directory: Path) -> None:
    """Replace `shard/` by the complete `shard.new/`. Each rename is atomic; between the two,
    only `shard.old/` and `shard.new/` exist, which `_recover_swap` completes."""
    os.rename(directory / SHARD, directory / OLD_SHARD)
    os.rename(directory / NEW_SHARD, directory / SHARD)
    _fsync_dir(directory)
    shutil.rmtree(directory / OLD_SHARD)


def _recover_swap(directory: Path) -> None:
    """Repair what an interrupted compaction left. `shard/` present: it is the shard in use (the
    copy may be partial, the old one is replaced), drop the others. Absent: the crash fell
    between the two renames, when `shard.new/` was already complete; promote it (or, failing
    that, put `shard.old/` back)."""
    shard, new, old = directory / SHARD, directory / NEW_SHARD, directory / OLD_SHARD
    if not shard.exists():
        if (new / CONFIG_FILE).exists() and old.exists():
            os.rename(new, shard)
        elif old.exists():
            os.rename(old, shard)
        _fsync_dir(directory)
    for leftover in (new, old):
        if leftover.exists():
            shutil.rmtree(leftover)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _create_payload_indexes(shard: qe.EdgeShard) -> None:
    shard.update(qe.UpdateOperation.create_field_index("tenant_id", qe.KeywordIndexParams(is_tenant=True)))
    # Only the tenant index may shape the HNSW graphs (one graph per tenant). Qdrant builds extra
    # graph links for every value of every payload index that allows it: with evidence_id that
    # is one sub-graph per document, which made optimize() 90x slower in our measurement.
    for name in KEYWORD_FIELDS:
        params = qe.KeywordIndexParams(enable_hnsw=False)
        shard.update(qe.UpdateOperation.create_field_index(name, params))
    for name in INTEGER_FIELDS:
        shard.update(
            qe.UpdateOperation.create_field_index(
                name, qe.IntegerIndexParams(lookup=True, range=True, enable_hnsw=False)
            )
        )
    for name in FLOAT_FIELDS:
        shard.update(qe.UpdateOperation.create_field_index(name, qe.FloatIndexParams(enable_hnsw=False)))


def _filter(spec: FilterSpec) -> qe.Filter:
    must: list[qe.ConditionType] = []
    for clause in spec.clauses:
        if isinstance(clause, KeywordIn):
            must.append(qe.FieldCondition(clause.field, match=_match(clause.values)))
        elif isinstance(clause, AbsentOrKeywordIn):
            must.append(
                qe.Filter(
                    should=[
                        qe.IsEmptyCondition(clause.field),
                        qe.FieldCondition(clause.field, match=_match(clause.values)),
                    ]
                )
            )
        else:
            assert isinstance(clause, NumberRange)
            bounds = qe.RangeFloat(gte=clause.gte, gt=clause.gt, lte=clause.lte, lt=clause.lt)
            must.append(qe.FieldCondition(clause.field, range=bounds))
    return qe.Filter(must=must)


def _match(values: tuple[str, ...]) -> qe.MatchValue | qe.MatchAny:
    return qe.MatchValue(values[0]) if len(values) == 1 else qe.MatchAny(list(values))


def _request(leg: LegQuery) -> qe.QueryRequest:
    if leg.leg is Leg.DENSE:
        assert isinstance(leg.vector, np.ndarray)
        query = qe.Query.Nearest(leg.vector.tolist(), using=DENSE)
        params = None
    else:
        assert isinstance(leg.vector, SparseVector)
        query = qe.Query.Nearest(
            qe.SparseVector(list(leg.vector.indices), list(leg.vector.values)), using=BM25
        )
        corpus = None if leg.idf_corpus is None else qe.IdfParams(corpus=_filter(leg.idf_corpus))
        params = qe.SearchParams(idf=corpus)
    return qe.QueryRequest(
        limit=leg.limit, query=query, filter=_filter(leg.filter), with_payload=False, params=params
    )


def _uuid(value: qe.PointId) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
