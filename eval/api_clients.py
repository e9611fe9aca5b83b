"""Agent clients of the API benchmarks: the workload, and a ledger of every write.

Each `AgentClient` works in a session of its own with a key of its own and loops over four
operations: search, record a tool result, archive some of its live results, recover one of
its archived results. Archive and recover only ever target results it recorded itself. It
keeps a ledger of every write it sent and of the answer it got (or did not get), which
`write_audit` holds against the archive afterwards. Record contents are unique per request,
so a stored result is traced back to its request by its sha256.
"""

from __future__ import annotations

import base64
import hashlib
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

OPERATIONS = ("search", "record", "archive", "recover")
EXPECTED_STATUS = {"search": 200, "record": 201, "archive": 200, "recover": 200}
DEFAULT_MIX = {"search": 0.40, "record": 0.30, "archive": 0.15, "recover": 0.15}
PROBLEM_JSON = "application/problem+json"
NO_ANSWER = 0  # the status of a call that got no HTTP answer (timeout, connection refused)

_WORDS = (
    "order",
    "shipment",
    "warehouse",
    "refund",
    "invoice",
    "timeout",
    "retry",
    "customer",
    "parcel",
    "carrier",
    "tracking",
    "delayed",
    "customs",
    "stock",
    "price",
    "supplier",
    "ticket",
    "escalation",
    "payment",
    "declined",
    "address",
    "label",
    "pallet",
    "库存",
    "物流",
    "退款",
    "订单",
    "发票",
    "仓库",
    "客户",
    "延迟",
)


@dataclass(frozen=True)
class Call:
    """One request as the client saw it."""

    op: str
    status: int  # NO_ANSWER when no HTTP answer came
    ms: float
    started: float  # time.monotonic() when it was sent
    problem_json: bool
    detail: str = ""  # why it failed: the problem `code` and request id, the transport error, ...

    @property
    def ok(self) -> bool:
        return self.status == EXPECTED_STATUS[self.op] and not self.detail


@dataclass
class SentRecord:
    """A record request and what came of it: `acked`, the status it failed with, or `no_answer`."""

    sha256: str
    outcome: str = "pending"
    result_id: str | None = None
    detail: str = ""


def sample_text(rng: random.Random, size: int, head: str = "") -> str:
    words: list[str] = [head] if head else []
    total = len(head)
    while total < size:
        word = rng.choice(_WORDS)
        words.append(word)
        total += len(word.encode("utf-8")) + 1
    return " ".join(words)


def sample_query(rng: random.Random) -> str:
    return " ".join(rng.sample(_WORDS, 2))


# How a load's searches are drawn. `repeating`: two words of the vocabulary, so one agent soon
# asks what it asked before and most searches are answered from the result cache; `unique`:
# the same and a word no other search of the run has, so every search misses the cache and
# runs the engine and hydration (what a search costs when its question is new).
QUERY_KINDS = ("repeating", "unique")


def searches_report(answered: int, from_cache: int) -> dict[str, Any]:
    """How many searches were answered, and how many of them from the result cache."""
    share = None if answered == 0 else round(from_cache / answered, 3)
    return {"answered": answered, "from_cache": from_cache, "from_cache_share": share}


def search_query(rng: random.Random, kind: str, tag: str) -> str:
    """A query of `kind` (QUERY_KINDS); `tag` names this search apart from every other."""
    query = sample_query(rng)
    return query if kind == "repeating" else f"{query} {tag}"


def _problem_detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(body, dict):
        return f"{body.get('code')} (request {body.get('request_id')}): {str(body.get('detail'))[:200]}"
    return str(body)[:200]


class AgentClient:
    """One simulated agent: a key, a session, a seeded random mix of operations."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        session_id: str,
        *,
        seed: int,
        timeout_s: float,
        mix: Mapping[str, float] = DEFAULT_MIX,
        max_bytes: int = 4096,
        queries: str = "repeating",
    ) -> None:
        self.session_id = session_id
        self.queries = queries
        self.searches_answered = 0
        self.searches_from_cache = 0  # answered 200 with `cached: true`
        self.api_key = api_key
        self.rng = random.Random(seed)
        self.mix = [(op, mix.get(op, 0.0)) for op in OPERATIONS]
        self.max_bytes = max_bytes
        self.http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {api_key}"}, timeout=timeout_s
        )
        self.calls: list[Call] = []
        self.sent: list[SentRecord] = []
        self.live: list[str] = []  # acknowledged, not archived
        self.archived: list[str] = []  # acknowledged archived
        self.archive_failed: dict[str, str] = {}  # result id -> the failure of its archive request
        self.recovers_ok: Counter[str] = Counter()
        self.recovers_failed: dict[str, list[str]] = {}
        self.bad_recoveries: list[str] = []  # 200, but the bytes did not hash to what was sent
        self._sha_of: dict[str, str] = {}  # result id -> sha256 sent
        self.crash: str | None = None

    def close(self) -> None:
        self.http.close()

    # ---- the loop ---------------------------------------------------------------------------------

    def run_until(self, stop: threading.Event) -> None:
        """Step until `stop` is set; an exception ends the loop and is kept in `crash`."""
        try:
            while not stop.is_set():
                self.step()
        except Exception as e:  # noqa: BLE001 - a client's own failure must show in the report
            self.crash = f"{type(e).__name__}: {e}"

    def step(self) -> None:
        op = self.rng.choices([o for o, _ in self.mix], weights=[w for _, w in self.mix])[0]
        if op == "recover" and not self.archived:
            op = "archive"
        if op == "archive" and not self.live:
            op = "record"
        {"search": self.search, "record": self.record, "archive": self.archive, "recover": self.recover}[op]()

    def _call(self, op: str, path: str, body: Mapping[str, Any] | None) -> tuple[Call, Any]:
        started = time.monotonic()
        try:
            response = self.http.post(path, json=body)
        except httpx.HTTPError as e:
            call = Call(op, NO_ANSWER, (time.monotonic() - started) * 1000, started, False, type(e).__name__)
            self.calls.append(call)
            return call, None
        ms = (time.monotonic() - started) * 1000
        problem = response.headers.get("content-type", "").startswith(PROBLEM_JSON)
        answer: Any = None
        detail = ""
        if response.status_code == EXPECTED_STATUS[op]:
            try:
                answer = response.json()
            except ValueError:
                detail = f"answered {response.status_code} with a body that is not JSON"
        else:
            detail = _problem_detail(response)
        call = Call(op, response.status_code, ms, started, problem, detail)
        self.calls.append(call)
        return call, answer

    @staticmethod
    def _outcome(call: Call) -> str:
        if call.ok:
            return "acked"
        return "no_answer" if call.status == NO_ANSWER else str(call.status)

    # ---- the operations ---------------------------------------------------------------------------

    def search(self) -> None:
        query = search_query(self.rng, self.queries, f"q-{self.session_id}-{len(self.calls)}")
        _, answer = self._call("search", "/v1/search", {"query": query, "limit": 10})
        if answer is not None:
            self.searches_answered += 1
            self.searches_from_cache += bool(answer.get("cached"))

    def record(self) -> None:
        seq = len(self.sent)
        size = self.rng.randint(128, self.max_bytes)
        if self.rng.random() < 0.1:  # some binary originals: bytes must come back exact
            data = f"{self.session_id}#{seq}:".encode() + self.rng.randbytes(size)
            body: dict[str, Any] = {"content_base64": base64.b64encode(data).decode("ascii")}
        else:
            text = sample_text(self.rng, size, head=f"{self.session_id}#{seq}")
            data = text.encode("utf-8")
            body = {"content": text}
        sent = SentRecord(hashlib.sha256(data).hexdigest())
        self.sent.append(sent)
        call, answer = self._call(
            "record", f"/v1/sessions/{self.session_id}/results", {"tool_name": "bench.fetch", **body}
        )
        sent.outcome, sent.detail = self._outcome(call), call.detail
        if answer is not None:
            sent.result_id = answer["result_id"]
            self._sha_of[answer["result_id"]] = sent.sha256
            self.live.append(answer["result_id"])

    def archive(self) -> None:
        chosen = self.rng.sample(self.live, k=min(len(self.live), self.rng.randint(1, 3)))
        for rid in chosen:
            self.live.remove(rid)
        targets = [{"result_id": rid, "note": f"{rid}: {sample_query(self.rng)}"} for rid in chosen]
        call, answer = self._call("archive", f"/v1/sessions/{self.session_id}/archive", {"targets": targets})
        if answer is not None:
            self.archived.extend(chosen)
        else:
            # Not retried: whatever the failure, the audit checks that nothing was archived.
            for rid in chosen:
                self.archive_failed[rid] = f"{self._outcome(call)} {call.detail}".strip()

    def recover(self) -> None:
        rid = self.rng.choice(self.archived)
        call, answer = self._call("recover", f"/v1/sessions/{self.session_id}/results/{rid}/recover", None)
        if answer is None:
            failure = f"{self._outcome(call)} {call.detail}".strip()
            self.recovers_failed.setdefault(rid, []).append(failure)
            return
        self.recovers_ok[rid] += 1
        if not recovered_matches(answer, self._sha_of[rid]):
            self.bad_recoveries.append(rid)


def recovered_bytes(answer: Mapping[str, Any]) -> bytes:
    if answer.get("content") is not None:
        return str(answer["content"]).encode("utf-8")
    return base64.b64decode(answer.get("content_base64") or "")


def recovered_matches(answer: Mapping[str, Any], sha256: str) -> bool:
    """The recovered bytes hash to what the client sent, and the server says the same."""
    return hashlib.sha256(recovered_bytes(answer)).hexdigest() == sha256 == answer.get("content_sha256")


class Fleet:
    """Clients, each on a thread of its own, from `start()` until `stop()`."""

    def __init__(self, clients: list[AgentClient]) -> None:
        self.clients = clients
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(
                target=c.run_until, args=(self._stop,), name=f"client-{c.session_id}", daemon=True
            )
            for c in clients
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, join_timeout_s: float) -> int:
        """Stop and wait (bounded) for every client's call in flight; returns threads still stuck."""
        self._stop.set()
        deadline = time.monotonic() + join_timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = 0
        for client, thread in zip(self.clients, self._threads, strict=True):
            if thread.is_alive():
                stuck += 1  # its HTTP client stays open: closing it under a call in flight is unsafe
            else:
                client.close()
        return stuck

    def calls(self) -> list[Call]:
        return [call for client in self.clients for call in client.calls]

    def crashes(self) -> list[str]:
        """Clients whose loop died of an exception of their own (a bug of the benchmark)."""
        return [f"{c.session_id}: {c.crash}" for c in self.clients if c.crash is not None]


def seed_items(docs: int, *, seed: int = 3) -> list[dict[str, str]]:
    """The knowledge records a benchmark stores before its load (the same for a given seed)."""
    rng = random.Random(seed)
    return [
        {"body": sample_text(rng, rng.randint(200, 1200)), "source": f"kb/doc-{i}", "evidence_id": f"doc-{i}"}
        for i in range(docs)
    ]


def seed_evidence(base_url: str, api_key: str, docs: int, *, seed: int = 3, batch: int = 50) -> int:
    """Store `docs` knowledge records through the API (so searches have something to find)."""
    items = seed_items(docs, seed=seed)
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=300.0) as http:
        for start in range(0, docs, batch):
            http.post("/v1/evidence/batch", json={"items": items[start : start + batch]}).raise_for_status()
    return docs


# ---- statistics ---------------------------------------------------------------------------------------


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (0.0 for an empty one)."""
    if not ordered:
        return 0.0
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))]


def latency_summary(calls: Iterable[Call], elapsed_s: float) -> dict[str, Any]:
    """Count, errors, statuses and p50/p95/p99 of the successful calls' latency, per operation."""
    by_op: dict[str, list[Call]] = {op: [] for op in OPERATIONS}
    for call in calls:
        by_op[call.op].append(call)
    out: dict[str, Any] = {}
    for op, group in by_op.items():
        ok_ms = sorted(c.ms for c in group if c.ok)
        statuses = Counter(str(c.status) if c.status != NO_ANSWER else "no_answer" for c in group)
        out[op] = {
            "count": len(group),
            "ok": len(ok_ms),
            "errors": len(group) - len(ok_ms),
            "statuses": dict(sorted(statuses.items())),
            "p50_ms": round(percentile(ok_ms, 0.50), 2),
            "p95_ms": round(percentile(ok_ms, 0.95), 2),
            "p99_ms": round(percentile(ok_ms, 0.99), 2),
            "max_ms": round(max((c.ms for c in group), default=0.0), 2),
            "throughput_per_s": round(len(ok_ms) / elapsed_s, 1) if elapsed_s > 0 else 0.0,
        }
    return out


class FloodClient(AgentClient):
    """A tenant's agent that floods: searches only, each asking for the most hits (100) with a
    question no other search asked, so every one runs the engine and hydrates a hundred spans,
    one after another without pause, never honouring a Retry-After. Its calls are its own
    (`calls`), apart from the measured tenants'."""

    def step(self) -> None:
        query = search_query(self.rng, "unique", f"flood-{self.session_id}-{len(self.calls)}")
        self._call("search", "/v1/search", {"query": query, "limit": 100})
