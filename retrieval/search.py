"""The query path: access check, pre-filters, both legs in one engine call, fusion.

Order of work for `Searcher.search(scope, query)`:
1. an owner the scope may not read -> FORBIDDEN (before touching the engine);
2. build the pre-filter (tenant, clearance, status, validity at as_of, narrowing filters);
3. encode the legs: BM25 terms (a query of only stop words has none: that leg has nothing to
   look for, which is not a failure) and the query embedding (a model failure -> UNAVAILABLE);
4. run the legs as one batch, each with the filter inside the engine (engine failure ->
   UNAVAILABLE);
5. fuse by weighted RRF (hybrid) or keep the leg's order; optionally keep one chunk per evidence;
6. read payloads for the final hits only; defence in depth: drop (and log) any point whose
   payload does not satisfy the filter in Python.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from . import fields
from .backend import Leg, LegQuery, ScoredPoint, VectorIndex
from .bm25 import Bm25Encoder
from .embedding import Embedder
from .errors import IndexUnavailable
from .filters import FilterSpec, search_filter, tenant_filter
from .fusion import weighted_rrf
from .outcome import Hit, LegScore, SearchOutcome, SearchStatus
from .query import AccessScope, SearchMode, SearchQuery
from .settings import SearchSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _LegRun:
    leg: Leg
    results: list[ScoredPoint]


class Searcher:
    def __init__(
        self,
        index: VectorIndex,
        bm25: Bm25Encoder,
        embedder: Embedder,
        settings: SearchSettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.index = index
        self.bm25 = bm25
        self.embedder = embedder
        self.settings = settings
        self.clock = clock

    def search(self, scope: AccessScope, query: SearchQuery) -> SearchOutcome:
        started = time.perf_counter()
        timings: dict[str, float] = {}
        if scope.owners is not None and query.owners is not None and not query.owners <= scope.owners:
            denied = sorted(query.owners - scope.owners)
            return SearchOutcome(
                SearchStatus.FORBIDDEN, query.mode, reason=f"this scope may not read memory owned by {denied}"
            )
        historical = query.as_of is not None
        as_of = fields.epoch_seconds(query.as_of) if query.as_of is not None else self.clock()
        spec = search_filter(scope, query, as_of, historical=historical)
        fusion = query.fusion or self.settings.fusion_for(query.text)
        want_bm25 = query.mode is SearchMode.BM25 or (
            query.mode is SearchMode.HYBRID and fusion.bm25_weight > 0
        )
        want_dense = query.mode is SearchMode.DENSE or (
            query.mode is SearchMode.HYBRID and fusion.dense_weight > 0
        )
        # The fusion depth is fixed by settings, not by collapsing: a deeper list changes every RRF
        # score, so one_hit_per_evidence may return fewer than `limit` hits rather than re-rank.
        depth = max(self.settings.candidates, query.limit)

        legs: list[LegQuery] = []
        if want_bm25:
            t = time.perf_counter()
            sparse = self.bm25.encode_query(query.text)
            timings["encode_bm25"] = _ms(t)
            if len(sparse):
                idf = tenant_filter(scope.tenant_id) if self.settings.tenant_idf else None
                legs.append(LegQuery(Leg.BM25, sparse, spec, depth, idf_corpus=idf))
        if want_dense:
            t = time.perf_counter()
            try:
                vector = self.embedder.embed_queries([query.text])[0]
            except IndexUnavailable as exc:
                return SearchOutcome(SearchStatus.UNAVAILABLE, query.mode, reason=f"dense leg: {exc.message}")
            timings["embed_query"] = _ms(t)
            legs.append(LegQuery(Leg.DENSE, vector, spec, depth))
        if not legs:
            timings["total"] = _ms(started)
            return SearchOutcome(
                SearchStatus.NO_MATCH,
                query.mode,
                reason="the query has no searchable terms (only stop words, punctuation or symbols)",
                timings_ms=timings,
            )

        t = time.perf_counter()
        try:
            runs = [_LegRun(q.leg, r) for q, r in zip(legs, self.index.query(legs), strict=True)]
        except IndexUnavailable as exc:
            return SearchOutcome(SearchStatus.UNAVAILABLE, query.mode, reason=exc.message)
        timings["index"] = _ms(t)

        t = time.perf_counter()
        weights = {Leg.BM25: fusion.bm25_weight, Leg.DENSE: fusion.dense_weight}
        try:
            hits = self._hits(runs, spec, fusion.k, weights, query)
        except IndexUnavailable as exc:
            return SearchOutcome(SearchStatus.UNAVAILABLE, query.mode, reason=exc.message)
        timings["payloads"] = _ms(t)
        timings["total"] = _ms(started)
        if not hits:
            return SearchOutcome(
                SearchStatus.NO_MATCH, query.mode, reason="nothing in this scope matched", timings_ms=timings
            )
        return SearchOutcome(SearchStatus.RESULTS, query.mode, tuple(hits), timings_ms=timings)

    def _hits(
        self, runs: list[_LegRun], spec: FilterSpec, k: float, weights: dict[Leg, float], query: SearchQuery
    ) -> list[Hit]:
        """Order the candidates, then read payloads only for as many as become hits."""
        # Candidates are keyed by their id's 128-bit integer, not the UUID: fusion hashes each of
        # the 200 several times, and a UUID hashes in Python (uuid.UUID.__hash__), an int in C.
        ids: dict[int, uuid.UUID] = {}
        # (rank, score) per point and leg; a LegScore is built for the hits only.
        ranks: dict[Leg, dict[int, tuple[int, float]]] = {}
        for run in runs:
            leg_ranks: dict[int, tuple[int, float]] = {}
            for rank, (pid, score) in enumerate(run.results, 1):
                ids[pid.int] = pid
                leg_ranks[pid.int] = (rank, score)
            ranks[run.leg] = leg_ranks
        ordered: list[tuple[int, float]]
        if query.mode is SearchMode.HYBRID:
            ordered = weighted_rrf(
                {leg.value: list(r) for leg, r in ranks.items()},
                {leg.value: w for leg, w in weights.items()},
                k,
            )
        else:
            ordered = [(p.id.int, p.score) for run in runs for p in run.results]
        bm25_ranks, dense_ranks = ranks.get(Leg.BM25, {}), ranks.get(Leg.DENSE, {})
        hits: list[Hit] = []
        seen: set[tuple[str, int]] = set()
        pos = 0
        while len(hits) < query.limit and pos < len(ordered):
            # Usually one round: `limit` payloads. Collapsing to one chunk per evidence reads more.
            want = query.limit - len(hits)
            step = ordered[pos : pos + (2 * want if query.one_hit_per_evidence else want)]
            pos += len(step)
            payloads = self.index.payloads([ids[key] for key, _ in step])
            for key, score in step:
                pid = ids[key]
                payload = payloads.get(pid)
                if payload is None:
                    continue  # deleted between the legs and this read
                if not spec.matches(vars(payload)):  # vars: a view, not a copy like asdict
                    log.error(
                        "%s returned point %s outside the search filter; dropped", self.index.description, pid
                    )
                    continue
                if query.one_hit_per_evidence:
                    named = (payload.evidence_id, payload.version)
                    if named in seen:
                        continue
                    seen.add(named)
                bm25, dense = bm25_ranks.get(key), dense_ranks.get(key)
                hits.append(
                    Hit.from_payload(
                        pid,
                        payload,
                        score,
                        None if bm25 is None else LegScore(*bm25),
                        None if dense is None else LegScore(*dense),
                    )
                )
                if len(hits) == query.limit:
                    break
        return hits


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000.0
