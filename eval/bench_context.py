"""Benchmark of the context assembler: what a stub costs, and how long a paper-size turn takes.

Stub overhead is the tokens of an archived result's stub beyond the tokens of its note (the
call, the markup, the recover instruction), over the archived results of a scripted
OpenTelemetry debugging session; the paper's stub form (`[set aside: tool(args); "note" |
ref:rN]`) is counted in the same run as the baseline. Assembly time is measured on a session of
the paper's measured size (26 results, about 2.25 M characters, a few of 0.25 to 1.25 M):
first with an empty token-count cache (every segment tokenised), then warm, against the live
view alone (reading and re-hashing every original, which assembly includes).
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from mnemo_sea.archive import Principal, Role, Sensitivity
from mnemo_sea.context import BpeCounter, CachedCounter
from mnemo_sea.eval.curation.generators import generate
from mnemo_sea.eval.curation.trace import Generated
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

STUB_OVERHEAD_TARGET = 60
# The paper's size profile: three large results and 23 ordinary ones, 2.25 M characters in all.
LARGE_RESULTS = (1_250_000, 450_000, 250_000)
ORDINARY_RESULTS = 23
TOTAL_CHARS = 2_250_000

_SERVICES = ("checkout", "payment-gateway", "cart", "frontend", "currency", "shipping", "email")
_CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("otel.traces.search", {"service": "checkout", "status": "error", "lookback": "15m"}),
    ("kubectl.logs", {"pod": "checkout-7d9f8b6c5-x2k4p", "since": "10m"}),
    ("otel.metrics.query", {"metric": "http.server.duration", "service": "payment-gateway", "p": 99}),
    ("grep.files", {"pattern": "PlaceOrder", "path": "src/checkout"}),
    ("read_file", {"path": "src/checkout/main.go"}),
    ("otel.traces.get", {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}),
    ("kubectl.describe", {"kind": "deployment", "name": "payment-gateway"}),
    ("http.get", {"url": "http://frontend:8080/api/cart?sessionId=9c1d"}),
)


def _log(rng: random.Random, size: int) -> str:
    """OpenTelemetry log text of exactly `size` characters (the experiment's F1 generator)."""
    return generate(Generated("otel_log", size, rng.randrange(2**31)))


def _sizes() -> list[int]:
    rest = TOTAL_CHARS - sum(LARGE_RESULTS)
    ordinary = [rest // ORDINARY_RESULTS] * ORDINARY_RESULTS
    ordinary[-1] += rest - sum(ordinary)
    # The large results land early, as in the paper's run (read, then set aside).
    return [
        *ordinary[:2],
        LARGE_RESULTS[0],
        *ordinary[2:6],
        LARGE_RESULTS[1],
        *ordinary[6:9],
        LARGE_RESULTS[2],
        *ordinary[9:],
    ]


def _note(rng: random.Random, n: int, tool: str) -> str:
    service = rng.choice(_SERVICES)
    return (
        f"{tool} #{n}: {rng.randrange(3, 900)} error spans in {service} between 10:0{rng.randrange(10)} and "
        f"10:1{rng.randrange(10)}; {rng.randrange(2, 40)} HTTP 504 from payment-gateway after 30 s; "
        f"trace ids kept in the original"
    )


def _paper_stub(tool: str, arguments: dict[str, Any], note: str, ref: str) -> str:
    import json

    args = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return f'[set aside: {tool}({args}); "{note}" | ref:{ref}]\n'


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "runs": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


def run(*, repeats: int = 20, seed: int = 7, data_dir: Path | None = None) -> dict[str, Any]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = data_dir or Path(tmp)
        agent = Principal("bench", "agent", frozenset({Role.AGENT, Role.READER}), Sensitivity.INTERNAL)
        counter = CachedCounter(BpeCounter())
        with Mnemo.open(folder, embedder=HashingEmbedder()) as mnemo:
            mnemo._token_counter = counter
            sizes = _sizes()
            notes: dict[str, str] = {}
            calls: dict[str, tuple[str, dict[str, Any]]] = {}
            for n, size in enumerate(sizes, start=1):
                tool, args = _CALLS[n % len(_CALLS)]
                r = mnemo.record(agent, "otel-1", tool, _log(rng, size), arguments=args)
                notes[r.result_id] = _note(rng, n, tool)
                calls[r.result_id] = (tool, args)
            # Full history first: every result live.
            t = time.perf_counter()
            full = mnemo.context(agent, "otel-1", budget_tokens=2_000_000, output_reserve=4096)
            full_cold = time.perf_counter() - t
            # Then the paper's decision: set aside all but the last three results.
            archived = [f"r{n}" for n in range(1, len(sizes) - 2)]
            mnemo.archive_results(agent, "otel-1", [{"id": rid, "note": notes[rid]} for rid in archived])
            counter_cold = CachedCounter(BpeCounter())
            mnemo._token_counter = counter_cold
            t = time.perf_counter()
            ctx = mnemo.context(agent, "otel-1", budget_tokens=200_000, output_reserve=4096)
            cold = time.perf_counter() - t
            warm: list[float] = []
            live_view: list[float] = []
            for _ in range(repeats):
                t = time.perf_counter()
                again = mnemo.context(agent, "otel-1", budget_tokens=200_000, output_reserve=4096)
                warm.append(time.perf_counter() - t)
                t = time.perf_counter()
                mnemo.live_view(agent, "otel-1")
                live_view.append(time.perf_counter() - t)
            assert again.text == ctx.text  # the same state, the same bytes
            overheads: list[int] = []
            paper: list[int] = []
            for seg in ctx.segments:
                if seg.kind != "archived_stub":
                    continue
                rid = seg.ids[0]
                note_tokens = counter.count(notes[rid])
                overheads.append(seg.tokens - note_tokens)
                tool, args = calls[rid]
                paper.append(counter.count(_paper_stub(tool, args, notes[rid], rid)) - note_tokens)
    warm_p50 = statistics.median(warm)
    view_p50 = statistics.median(live_view)
    return {
        "session": {
            "results": len(sizes),
            "characters": sum(sizes),
            "largest": sorted(sizes, reverse=True)[:3],
            "archived": len(archived),
        },
        "tokenizer": counter.name,
        "stub_overhead_tokens": {
            "stubs": len(overheads),
            "median": statistics.median(overheads),
            "max": max(overheads),
            "mean": round(statistics.fmean(overheads), 1),
            "target_max": STUB_OVERHEAD_TARGET,
            "paper_style_median": statistics.median(paper),
            "ratio_to_paper_style": round(statistics.median(overheads) / statistics.median(paper), 2),
        },
        "tokens": {
            "full_history": full.used_tokens,
            "archived_context": ctx.used_tokens,
            "ratio": round(ctx.used_tokens / full.used_tokens, 4),
        },
        "assembly": {
            "full_history_cold_ms": round(full_cold * 1000, 1),
            "archived_cold_ms": round(cold * 1000, 1),
            "warm": _ms(warm),
            "live_view": _ms(live_view),
            "warm_over_live_view": round(warm_p50 / view_p50, 2),
            "count_cache_hits": counter_cold.hits,
            "count_cache_misses": counter_cold.misses,
        },
        "targets_met": {"stub_overhead": max(overheads) <= STUB_OVERHEAD_TARGET},
    }
