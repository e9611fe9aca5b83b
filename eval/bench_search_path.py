"""Benchmark: what `Mnemo.search` costs on top of the bare engine call it wraps (issue 13, row 1).

One embedded Mnemo (`Mnemo.open` on a temporary folder, the hashing embedder, so the model is
not the subject) holds N synthetic documents over 100 tenants, loaded through `Mnemo.ingest`.
Then, for the same queries, in the same process, interleaved query by query and round by round:

- `engine`: `mnemo.index.search(scope, query)` with the AccessScope and SearchQuery the facade
  builds for that principal (the baseline);
- `facade`: `mnemo.search(principal, text)` with the result cache always missing (a cached answer
  is not the subject; the put still runs, as on a real miss): validation, cache key, engine,
  batched, access-checked, hash-verified hydration;
- `facade_cached`: `mnemo.search` answered from the result cache (pointers only; hydration
  still runs), reported apart.

Each side's p50/p95 over all calls and the ratio facade p50 / engine p50 (target <= 1.3), also
with `busy` CPU-bound processes running beside the timed rounds (eval/busy_cpus.py). With
`profile`, a cProfile of `profile_searches` facade calls adds where the time goes (top functions
by own and cumulative time). JSON on stdout via `mnemo-sea bench search-path`.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mnemo_sea.archive import EvidenceInput, Principal, Role, Sensitivity
from mnemo_sea.eval.busy_cpus import busy_processes
from mnemo_sea.eval.synthetic import build_corpus
from mnemo_sea.retrieval import AccessScope, SearchQuery
from mnemo_sea.system.caches import Cache, CacheStats
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

TARGETS = {"ratio_max": 1.3}
DEFAULT_SIZES = (10_000, 100_000)  # the sizes issue 13 names
TENANTS = 100


class _AlwaysMiss:
    """The facade's cache with every lookup a miss: generations and puts go to the real cache
    (a miss pays them in production too), answers never come from it."""

    def __init__(self, inner: Cache) -> None:
        self._inner = inner

    def tenant_generation(self, tenant: str) -> int:
        return self._inner.tenant_generation(tenant)

    def bump_generation(self, tenant: str) -> int:
        return self._inner.bump_generation(tenant)

    def lookup_search(self, tenant: str, query_key: str) -> tuple[int, dict[str, Any] | None]:
        return self._inner.tenant_generation(tenant), None

    def put_search(self, tenant: str, generation: int, query_key: str, value: Mapping[str, Any]) -> bool:
        return self._inner.put_search(tenant, generation, query_key, value)

    def purge_tenant(self, tenant: str) -> int:
        return self._inner.purge_tenant(tenant)

    def stats(self) -> CacheStats:
        return self._inner.stats()

    def ping(self) -> None:
        self._inner.ping()

    def close(self) -> None:
        self._inner.close()


def _latency(samples_ms: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered), 3), "p95_ms": round(p95, 3), "runs": len(ordered)}


def _principal(tenant: str) -> Principal:
    return Principal(tenant, "bench-agent", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)


def _scope_and_query(principal: Principal, text: str, limit: int) -> tuple[AccessScope, SearchQuery]:
    """What `Mnemo.search` hands the engine for this principal and text (an agent: no owner filter)."""
    scope = AccessScope(principal.tenant_id, clearance=int(principal.clearance), owners=None)
    return scope, SearchQuery(text, limit=limit, one_hit_per_evidence=True)


def _load(mnemo: Mnemo, texts: Sequence[str], tenants: Sequence[str], batch: int) -> float:
    by_tenant: dict[str, list[EvidenceInput]] = {}
    for i, (text, tenant) in enumerate(zip(texts, tenants, strict=True)):
        by_tenant.setdefault(tenant, []).append(EvidenceInput(text, "bench", evidence_id=f"doc-{i}"))
    started = time.perf_counter()
    for tenant, items in sorted(by_tenant.items()):
        for start in range(0, len(items), batch):
            mnemo.ingest(_principal(tenant), items[start : start + batch])
    return time.perf_counter() - started


def _profile(call: Callable[[], None], searches: int, top: int) -> dict[str, Any]:
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for _ in range(searches):
        call()
    profiler.disable()
    total = time.perf_counter() - started
    stats = pstats.Stats(profiler, stream=io.StringIO())
    rows: list[dict[str, Any]] = []
    for (file, line, name), (_cc, calls, own, cumulative, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append(
            {
                "function": f"{Path(file).name}:{line}:{name}",
                "calls_per_search": round(calls / searches, 1),
                "own_ms_per_search": round(own * 1000 / searches, 4),
                "cumulative_ms_per_search": round(cumulative * 1000 / searches, 4),
            }
        )
    return {
        "searches": searches,
        "ms_per_search_under_profiler": round(total * 1000 / searches, 3),
        "by_own_time": sorted(rows, key=lambda r: -r["own_ms_per_search"])[:top],
        "by_cumulative_time": sorted(rows, key=lambda r: -r["cumulative_ms_per_search"])[:top],
    }


def run(
    n_docs: int = 10_000,
    *,
    queries: int = 100,
    rounds: int = 5,
    limit: int = 10,
    batch: int = 500,
    profile: bool = True,
    profile_searches: int = 200,
    profile_top: int = 25,
    folder: Path | None = None,
    progress: Callable[[str], None] | None = None,
    busy: int = 0,
) -> dict[str, Any]:
    say = progress or (lambda _msg: None)
    corpus = build_corpus(n_docs, tenants=TENANTS, queries=queries, dim=8)
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-search-path-", dir=folder) as tmp:
        mnemo = Mnemo.open(Path(tmp) / "data", embedder=HashingEmbedder())
        try:
            say(f"ingesting {n_docs} documents over {TENANTS} tenants")
            load_seconds = _load(mnemo, corpus.texts, corpus.tenants, batch)
            real_cache = mnemo.cache
            missing = _AlwaysMiss(real_cache)
            cases = [
                (_principal(tenant), text, *_scope_and_query(_principal(tenant), text, limit))
                for text, tenant in zip(corpus.query_texts, corpus.query_tenants, strict=True)
            ]
            hits = [len(mnemo.index.search(scope, query).hits) for _, _, scope, query in cases]
            # Warm both sides (and fill the result cache for the cached side).
            for principal, text, scope, query in cases:
                mnemo.index.search(scope, query)
                mnemo.search(principal, text, limit=limit)
            engine: list[float] = []
            facade: list[float] = []
            cached: list[float] = []
            mismatched = 0
            say(f"timing {rounds} rounds of {len(cases)} queries, {busy} CPU-bound processes beside")
            with busy_processes(busy) as beside:
                for r in range(rounds):
                    for i, (principal, text, scope, query) in enumerate(cases):
                        # Alternate which side goes first, so neither always runs on a warmer cache line.
                        order = ("engine", "facade") if (r + i) % 2 == 0 else ("facade", "engine")
                        for side in order:
                            if side == "engine":
                                t = time.perf_counter()
                                outcome = mnemo.index.search(scope, query)
                                engine.append((time.perf_counter() - t) * 1000)
                            else:
                                mnemo.cache = missing
                                t = time.perf_counter()
                                result = mnemo.search(principal, text, limit=limit)
                                facade.append((time.perf_counter() - t) * 1000)
                                mnemo.cache = real_cache
                                if result.cached:
                                    raise AssertionError("the uncached side was answered from the cache")
                        if [h.evidence_id for h in result.hits] != [h.evidence_id for h in outcome.hits]:
                            mismatched += 1
                        t = time.perf_counter()
                        again = mnemo.search(principal, text, limit=limit)
                        cached.append((time.perf_counter() - t) * 1000)
                        if not again.cached:
                            raise AssertionError("the cached side missed the cache")
            engine_l, facade_l, cached_l = _latency(engine), _latency(facade), _latency(cached)
            ratio = facade_l["p50_ms"] / engine_l["p50_ms"]
            report: dict[str, Any] = {
                "benchmark": "search-path",
                "docs": n_docs,
                "tenants": TENANTS,
                "queries": len(cases),
                "rounds": rounds,
                "limit": limit,
                "mean_hits": round(sum(hits) / len(hits), 2),
                "ingest_seconds": round(load_seconds, 2),
                "engine": engine_l,
                "facade_uncached": facade_l,
                "facade_cached": cached_l,
                "ratio_p50": round(ratio, 3),
                "ratio_p95": round(facade_l["p95_ms"] / engine_l["p95_ms"], 3),
                "cached_ratio_p50": round(cached_l["p50_ms"] / engine_l["p50_ms"], 3),
                "facade_overhead_ms_p50": round(facade_l["p50_ms"] - engine_l["p50_ms"], 3),
                "hits_differing_from_engine": mismatched,
                "busy": beside.report(),
                "targets": TARGETS,
                "ok": ratio <= TARGETS["ratio_max"] and mismatched == 0,
            }
            if profile:
                say(f"profiling {profile_searches} uncached facade searches")
                mnemo.cache = missing
                state = {"i": 0}

                def one() -> None:
                    principal, text, _, _ = cases[state["i"] % len(cases)]
                    state["i"] += 1
                    mnemo.search(principal, text, limit=limit)

                report["profile"] = _profile(one, profile_searches, profile_top)
                mnemo.cache = real_cache
            return report
        finally:
            mnemo.close()
