"""The baseline of the API load benchmark: the same operations called in process on `Mnemo`.

After the API process has stopped, the benchmark opens a fresh stack like the API's (its own
scratch database, Redis prefix and index, seeded with the same records) in its own process
and runs one agent's workload (the same mix, the same kind of queries and contents) straight
on the facade for a few seconds. What a REST call costs
beyond this is what the HTTP layer adds: the request, authentication, validation, encoding,
the thread hop, and the client's own share of the machine.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from mnemo_sea.system.mnemo import Mnemo

from .api_clients import (
    OPERATIONS,
    Call,
    latency_summary,
    sample_query,
    sample_text,
    search_query,
    searches_report,
)


def run_facade(
    mnemo: Mnemo,
    api_key: str,
    session_id: str,
    *,
    mix: Mapping[str, float],
    duration_s: float,
    seed: int,
    max_bytes: int = 4096,
    queries: str = "repeating",
) -> dict[str, Any]:
    """One in-process agent for `duration_s`: p50/p95/p99 and throughput per operation."""
    principal = mnemo.archive.authenticate(api_key)
    rng = random.Random(seed)
    weights = [(op, mix.get(op, 0.0)) for op in OPERATIONS]
    live: list[str] = []
    archived: list[str] = []
    calls: list[Call] = []
    cached: Counter[bool] = Counter()

    def search() -> None:
        query = search_query(rng, queries, f"q-{session_id}-{len(calls)}")
        found = mnemo.search(principal, query, limit=10).raise_for_status()
        cached[found.cached] += 1

    def record() -> None:
        text = sample_text(rng, rng.randint(128, max_bytes), head=f"{session_id}#{len(calls)}")
        live.append(mnemo.record(principal, session_id, content=text, tool_name="bench.fetch").result_id)

    def archive() -> None:
        chosen = rng.sample(live, k=min(len(live), rng.randint(1, 3)))
        for rid in chosen:
            live.remove(rid)
        targets = [{"result_id": rid, "note": f"{rid}: {sample_query(rng)}"} for rid in chosen]
        mnemo.archive_results(principal, session_id, targets=targets)
        archived.extend(chosen)

    def recover() -> None:
        mnemo.recover(principal, session_id, rng.choice(archived))

    steps = {"search": search, "record": record, "archive": archive, "recover": recover}
    started = time.monotonic()
    while time.monotonic() - started < duration_s:
        op = rng.choices([o for o, _ in weights], weights=[w for _, w in weights])[0]
        if op == "recover" and not archived:
            op = "archive"
        if op == "archive" and not live:
            op = "record"
        began = time.monotonic()
        steps[op]()
        calls.append(Call(op, _EXPECTED[op], (time.monotonic() - began) * 1000, began, False))
    elapsed = time.monotonic() - started
    return {
        "duration_s": round(elapsed, 2),
        "operations": {op: s for op, s in latency_summary(calls, elapsed).items() if s["count"]},
        "searches": searches_report(cached[True] + cached[False], cached[True]),
    }


# A facade call that returns is a success; the status only makes `Call.ok` true.
_EXPECTED = {"search": 200, "record": 201, "archive": 200, "recover": 200}
