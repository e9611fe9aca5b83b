"""The query path: access check, pre-filters, both legs in one engine call, fusion.

Order of work for `Searcher.search(scope, query)`:
1. an owner the scope may not read -> FORBIDDEN (before touching the engine);
2. build the pre-filter (tenant, clearance, status, validity at as_of, narrowing filters);
3. encode the legs: BM25 terms (a query of only stop words has none: that leg has nothing to
   look for, which is not a failure) and the query embedding (a model failure -> UNAVAILABLE);
4. run the legs as one batch, each with the filter inside the engine (engine failure ->
   UNAVAILABLE);
5. fuse by weighted RRF (hybrid) or keep the leg's order; with `min_score`, leave out the
   candidates under the relevance floor (floor.py) before `limit` is counted; optionally keep
   one chunk per evidence;
6. read payloads for the final hits only; defence in depth: drop (and log) any point whose
   payload does not satisfy the filter in Python.

Every hit of a query that was embedded carries its dense score: a hybrid hit the dense leg did
not return gets its cosine from the chunk's stored vector (one read for the few such hits).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from . import fields, floor
from .backend import Leg, LegQuery, ScoredPoint, VectorIndex
from .bm25 import Bm25Encoder
from .embedding import Embedder
from .errors import IndexUnavailable
from .filters import FilterSpec, search_filter, tenant_filter
from .floor import Vector
from .fusion import weighted_rrf
from .outcome import Hit, LegScore, SearchOutcome, SearchStatus
from .query import AccessScope, SearchMode, SearchQuery
from .settings import SearchSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _LegRun:
    leg: Leg
    results: list[ScoredPoint]


@dataclass(frozen=True)
class _QueryVectors:
    """The query as the floor and the dense scores need it: its embedding (None when it was not
    embedded: bm25 mode) and its BM25 term dimensions."""

    dense: Vector | None
    terms: tuple[int, ...]


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
        min_score = query.min_score
        # A floor needs the query's terms and its embedding even for a leg that does not run:
        # it keeps exact lexical matches and judges every candidate by its cosine.
        terms: tuple[int, ...] = ()
        if want_bm25 or min_score is not None:
            t = time.perf_counter()
            sparse = self.bm25.encode_query(query.text)
            timings["encode_bm25"] = _ms(t)
            terms = sparse.indices
            if want_bm25 and len(sparse):
                idf = tenant_filter(scope.tenant_id) if self.settings.tenant_idf else None
                legs.append(LegQuery(Leg.BM25, sparse, spec, depth, idf_corpus=idf))
        vector: Vector | None = None
        if want_dense or min_score is not None:
            t = time.perf_counter()
            try:
                vector = self.embedder.embed_queries([query.text])[0]
            except IndexUnavailable as exc:
                return SearchOutcome(SearchStatus.UNAVAILABLE, query.mode, reason=f"dense leg: {exc.message}")
            timings["embed_query"] = _ms(t)
            if want_dense:
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
            hits, floored = self._hits(runs, spec, fusion.k, weights, query, _QueryVectors(vector, terms))
        except IndexUnavailable as exc:
            return SearchOutcome(SearchStatus.UNAVAILABLE, query.mode, reason=exc.message)
        timings["payloads"] = _ms(t)
        timings["total"] = _ms(started)
        if not hits:
            reason = (
                f"nothing in this scope reached min_score {min_score} ({floored} below it)"
                if floored
                else "nothing in this scope matched"
            )
            return SearchOutcome(SearchStatus.NO_MATCH, query.mode, reason=reason, timings_ms=timings)
        return SearchOutcome(SearchStatus.RESULTS, query.mode, tuple(hits), timings_ms=timings)

    def _hits(
        self,
        runs: list[_LegRun],
        spec: FilterSpec,
        k: float,
        weights: dict[Leg, float],
        query: SearchQuery,
        asked: _QueryVectors,
    ) -> tuple[list[Hit], int]:
        """Order the candidates, leave out those under the floor, then read payloads only for as
        many as become hits. Also answers how many candidates the floor left out."""
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
        bm25_ranks = ranks.get(Leg.BM25, {})
        hits: list[Hit] = []
        seen: set[tuple[str, int]] = set()
        floored = 0
        pos = 0
        while len(hits) < query.limit and pos < len(ordered):
            # Usually one round: `limit` payloads. Collapsing to one chunk per evidence, or a
            # floor, reads more.
            want = query.limit - len(hits)
            step = ordered[pos : pos + (2 * want if query.one_hit_per_evidence else want)]
            pos += len(step)
            dense_scores = self._dense_scores(step, ids, ranks, query.min_score, asked)
            if query.min_score is not None:
                before = len(step)
                step = [(key, score) for key, score in step if dense_scores.passed(key)]
                floored += before - len(step)
            payloads = self.index.payloads([ids[key] for key, _ in step]) if step else {}
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
                bm25 = bm25_ranks.get(key)
                hits.append(
                    Hit.from_payload(
                        pid,
                        payload,
                        score,
                        None if bm25 is None else LegScore(*bm25),
                        dense_scores.scores.get(key),
                        dense_scores.relevance.get(key),
                    )
                )
                if len(hits) == query.limit:
                    break
        return hits, floored

    def _dense_scores(
        self,
        step: list[tuple[int, float]],
        ids: dict[int, uuid.UUID],
        ranks: dict[Leg, dict[int, tuple[int, float]]],
        min_score: float | None,
        asked: _QueryVectors,
    ) -> _DenseScores:
        """Each candidate's dense score and relevance, and whether it passes the floor
        (floor.py), reading stored vectors (one call) only for what the legs did not tell: the
        cosine of a candidate the dense leg did not return, and, under a floor, the terms of a
        chunk below it."""
        dense_ranks, bm25_ranks = ranks.get(Leg.DENSE, {}), ranks.get(Leg.BM25, {})
        # BM25 lists come best first: the first score is the query's best lexical match.
        best_bm25 = next(iter(bm25_ranks.values()))[1] if bm25_ranks else 0.0

        def relevance_of(key: int, dense: float) -> float:
            lexical = bm25_ranks.get(key)
            return floor.relevance(dense, None if lexical is None else lexical[1], best_bm25)

        scores = {key: LegScore(*dense_ranks[key]) for key, _ in step if key in dense_ranks}
        relevance = {key: relevance_of(key, leg.score) for key, leg in scores.items()}
        unscored = [key for key, _ in step if key not in scores] if asked.dense is not None else []
        under = (
            [key for key, rel in relevance.items() if rel < min_score]
            if min_score is not None and asked.terms
            else []
        )
        stored = self.index.vectors([ids[key] for key in unscored + under]) if unscored or under else {}
        for key in unscored:
            vectors = stored.get(ids[key])
            if vectors is not None and asked.dense is not None:
                scores[key] = LegScore(None, floor.cosine(asked.dense, vectors.dense))
                relevance[key] = relevance_of(key, scores[key].score)
        passed = (
            {
                key
                for key, _ in step
                if floor.passes(min_score, relevance.get(key), asked.terms, stored.get(ids[key]))
            }
            if min_score is not None
            else set()
        )
        return _DenseScores(scores, relevance, passed)


@dataclass(frozen=True)
class _DenseScores:
    """The dense scores and relevance of one step's candidates, and (under a floor) which of
    them pass."""

    scores: dict[int, LegScore]
    relevance: dict[int, float]
    passing: set[int]

    def passed(self, key: int) -> bool:
        return key in self.passing


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000.0
