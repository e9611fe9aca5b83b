"""`bench engine-ingest` on a tiny corpus: the report's shape, and that its runs really index
(its speed is the benchmark's business, never a test's)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from mnemo_sea.eval import bench_engine_ingest
from mnemo_sea.retrieval import EvidenceDocument, HybridIndex, UpsertReport


def test_a_tiny_run_reports_both_embedders_both_workloads_both_sides_and_a_profile() -> None:
    report = bench_engine_ingest.run(40, batch_size=15, rounds=2, tenants=4, profile=True)
    assert (report["documents"], report["tenants"], report["batch_size"], report["rounds"]) == (40, 4, 15, 2)
    assert set(report["embedders"]) == {"precomputed", "hashing"}
    for name, side in report["embedders"].items():
        assert side["dimension"] == (384 if name == "precomputed" else 64)
        assert side["points"] == 40  # short documents: one chunk, one point each
        for workload in ("one_call", "batches"):
            measured = side[workload]
            assert len(measured["engine_seconds"]) == len(measured["edge_seconds"]) == 2
            assert len(measured["engine_cpu_seconds"]) == len(measured["edge_cpu_seconds"]) == 2
            assert measured["engine_docs_per_s"] > 0 and measured["edge_points_per_s"] > 0
            assert measured["engine_cpu_us_per_doc"] > 0 and measured["edge_cpu_us_per_point"] > 0
            assert measured["edge_share"] == pytest.approx(
                measured["engine_docs_per_s"] / measured["edge_points_per_s"], rel=0.01
            )
        # The target is judged on the one-call workload (the issue's), whatever the batches did.
        rate = side["one_call"]["engine_docs_per_s"]
        assert side["meets_target"] == (rate >= side["target_engine_docs_per_s"])
    assert report["meets_targets"] == all(s["meets_target"] for s in report["embedders"].values())
    own = report["profile"]["own_time"]
    assert own and {"function", "calls", "seconds", "share"} <= set(own[0])


def test_each_workload_makes_its_own_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """One call of every document, and calls of `batch_size`, each followed by a flush."""
    calls: list[int] = []
    flushes: list[int] = []
    upsert, flush = HybridIndex.upsert, HybridIndex.flush

    def counted_upsert(self: HybridIndex, documents: Iterable[EvidenceDocument], **kw: Any) -> UpsertReport:
        docs = list(documents)
        calls.append(len(docs))
        return upsert(self, docs, **kw)

    def counted_flush(self: HybridIndex) -> None:
        flushes.append(len(calls))
        flush(self)

    monkeypatch.setattr(HybridIndex, "upsert", counted_upsert)
    monkeypatch.setattr(HybridIndex, "flush", counted_flush)
    bench_engine_ingest.run(25, batch_size=10, rounds=1, tenants=2)
    # Per embedder: the one call (25), then batches of 10 (10, 10, 5), each flushed after.
    assert calls == [25, 10, 10, 5] * 2
    assert flushes[:4] == [1, 2, 3, 4]


def test_a_run_whose_upserts_index_nothing_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def upsert_nothing(self: HybridIndex, documents: Iterable[EvidenceDocument], **_: Any) -> UpsertReport:
        return UpsertReport()

    monkeypatch.setattr(HybridIndex, "upsert", upsert_nothing)
    with pytest.raises(RuntimeError, match="0 points indexed of 20 documents"):
        bench_engine_ingest.run(20, batch_size=10, rounds=1, tenants=2)
