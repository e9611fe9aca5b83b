"""`mnemo-sea demo`: the whole job on the embedded default (SQLite + Qdrant Edge), no network.

It walks the scenarios of the design notes from the sample data shipped in the package
(never from ../shared): a veterinary clinic's knowledge base in Chinese and an order
investigation in English, as two tenants that never see each other; hybrid search; a
session whose long tool logs are archived with notes; a rejected batch; a refused archive
of a vet approval; an exact, hash-checked recovery with a staleness warning; a memory
correction; a task state that refuses to turn an unknown into a definite outcome, and the
working context under a token budget; a citation check; a verified deletion; audit chains and
fsck. Every step is checked, and the run ends with one PASS/FAIL line.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mnemo_sea.archive import (
    BatchRejected,
    NotFound,
    Principal,
    Role,
    Sensitivity,
    TaskStateRejected,
)
from mnemo_sea.context import ContextOverBudget
from mnemo_sea.demo.samples import load_sample_citations, load_sample_tenant, load_session_script
from mnemo_sea.errors import MnemoError
from mnemo_sea.retrieval import Embedder
from mnemo_sea.system.fsck import run_fsck
from mnemo_sea.system.mnemo import Mnemo

Say = Callable[[str], None]


@dataclass
class Checks:
    say: Say
    failures: list[str] = field(default_factory=list)

    def check(self, ok: bool, what: str) -> None:
        self.say(f"  [{'ok' if ok else 'FAIL'}] {what}")
        if not ok:
            self.failures.append(what)


def run(data_dir: Path | None = None, *, embedder: Embedder | None = None, say: Say = print) -> bool:
    """Run the walk-through in `data_dir` (a fresh temporary folder by default)."""
    with tempfile.TemporaryDirectory(prefix="mnemo-demo-") as tmp:
        folder = data_dir or Path(tmp) / "data"
        with Mnemo.open(folder, embedder=embedder) as mnemo:
            return _walk(mnemo, Checks(say))


def _walk(m: Mnemo, c: Checks) -> bool:
    script = load_session_script()
    clinic_script, shop_script = script.tenant("clinic"), script.tenant("shop")
    vet = Principal("clinic", clinic_script.agent, frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
    clinic_admin = Principal("clinic", "dpo", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
    shop = Principal("shop", shop_script.agent, frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
    shop_admin = Principal("shop", "shop-admin", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)

    c.say("1. Ingest two knowledge bases: a vet clinic (Chinese) and a shop (English), as two tenants")
    clinic_kb = m.ingest(vet, load_sample_tenant("clinic"))
    shop_kb = m.ingest(shop, load_sample_tenant("shop"))
    c.say(f"     clinic: {len(clinic_kb.stored)} versions stored; shop: {len(shop_kb.stored)}")
    history = m.archive.evidence_history(vet, "policy:analgesia:cats")
    c.check(
        [h.status for h in history] == ["superseded", "active"], "a policy revision supersedes v1, keeps it"
    )

    c.say("2. Hybrid search (BM25 + vectors) under tenant pre-filters, hydrated from the archive")
    hits = m.search(vet, "柯利犬可以用伊维菌素驱螨吗", limit=3)
    for h in hits.hits:
        c.say(f"     {h.evidence_id} v{h.version} [{h.locator}] bm25#{h.bm25_rank} dense#{h.dense_rank}")
    c.check(
        hits.status == "results" and hits.hits[0].evidence_id.startswith("drug:ivermectin"),
        "clinic finds the ivermectin label",
    )
    english = m.search(shop, "how long does cross-border delivery take", limit=3)
    c.check(
        english.status == "results" and english.hits[0].evidence_id == "policy:delivery:cross-border:2026-10",
        "shop finds the cross-border delivery policy",
    )
    foreign = m.search(shop, "柯利犬可以用伊维菌素驱螨吗", limit=20)
    c.check(
        all(not h.evidence_id.startswith(("drug:", "policy:prescription")) for h in foreign.hits),
        "the shop never sees clinic evidence",
    )

    c.say("3. Record the clinic visit's tool results (long logs, a vet approval, a stock snapshot)")
    session = clinic_script.sessions[0]
    ids: dict[str, str] = {}
    for call in session.calls:
        result = m.record(
            vet,
            session.session_id,
            call.tool,
            call.content,
            arguments=call.arguments,
            observed_at=call.observed_at,
            policy_class=call.policy_class,
            owner=session.owner,
        )
        ids[call.label] = result.result_id
    before = len(m.live_view(vet, session.session_id).text)
    c.check(
        list(ids.values()) == [f"r{i}" for i in range(1, len(ids) + 1)],
        f"stable ids {', '.join(ids.values())}",
    )

    c.say("4. A batch naming an id that was never issued is rejected whole")
    try:
        m.archive_results(vet, session.session_id, [(ids["lab_log"], "化验日志"), ("r99", "不存在")])
        c.check(False, "the batch with r99 is rejected")
    except BatchRejected as e:
        c.say(f"     {e.message}")
        c.check(
            all(r.state == "live" for r in m.archive.list_results(vet, session.session_id)),
            "nothing archived",
        )

    c.say("5. The vet approval is protected: archiving it is refused")
    try:
        m.archive_results(vet, session.session_id, [(ids["vet_approval"], "已批准")])
        c.check(False, "archiving the vet approval is refused")
    except BatchRejected as e:
        c.check(e.targets[0].status == "protected", f"refused: {e.targets[0].message}")

    c.say("6. Archive the long results with the agent's notes; stubs stay in place")
    to_archive = [
        (ids[x.label], x.archive_note)
        for x in session.calls
        if x.archive_note and x.policy_class not in m.archive.policy.protected_classes
    ]
    m.archive_results(vet, session.session_id, to_archive, idempotency_key="visit-doudou-turn-7")
    view = m.live_view(vet, session.session_id).text
    c.say(f"     live context: {before} -> {len(view)} characters")
    c.check(
        len(view) < before / 2 and f'recover_result("{ids["lab_log"]}")' in view, "stubs name how to recover"
    )
    c.check(
        "王敏" in view and "青霉素" in view,
        "the approval and the owner-confirmed allergy stay live, verbatim",
    )

    c.say("7. Recover: the exact original, hash-checked, labelled historical; the stock snapshot is stale")
    lab = m.recover(vet, session.session_id, ids["lab_log"])
    original = session.call("lab_log").content.encode("utf-8")
    c.check(
        lab.content == original and hashlib.sha256(lab.content).hexdigest() == lab.original.content_sha256,
        f"{ids['lab_log']} comes back byte-exact as {lab.appended.result_id}",
    )
    stock = m.recover(vet, session.session_id, ids["stock"])
    c.say(f"     {stock.staleness_warning}")
    c.check(
        stock.staleness_warning is not None and 'status="historical"' in stock.rendered, "stale-data warning"
    )

    c.say("8. The shop's investigation: a carrier query that timed out, archived, then found by its note")
    shop_session = shop_script.sessions[0]
    shop_ids = {
        x.label: m.record(
            shop,
            shop_session.session_id,
            x.tool,
            x.content,
            arguments=x.arguments,
            observed_at=x.observed_at,
            policy_class=x.policy_class,
            owner=shop_session.owner,
        ).result_id
        for x in shop_session.calls
    }
    m.archive_results(
        shop,
        shop_session.session_id,
        [(shop_ids["tracking_log"], shop_session.call("tracking_log").archive_note or "tracking log")],
    )
    notes = m.search(shop, "carrier timeout tracking", kinds=["tool_result"])
    c.check(
        [h.locator for h in notes.hits][:1] == [f"{shop_session.session_id}/{shop_ids['tracking_log']}"],
        "the archived note is searchable, pointing at the result",
    )
    try:
        m.recover(vet, shop_session.session_id, shop_ids["tracking_log"])
        c.check(False, "the clinic cannot recover the shop's result")
    except NotFound:
        c.check(True, "the clinic gets NotFound for the shop's session")

    _context_step(m, c, shop, shop_session.session_id, shop_ids)

    c.say("10. Memory: a correction supersedes, the history keeps both")
    for fact in clinic_script.memory:
        m.remember(vet, fact.owner, fact.key, fact.value, fact.provenance)
    key = clinic_script.memory[-1]
    current = m.current(vet, key.owner, key.key)
    chain = m.memory_history(vet, key.owner, key.key)
    value = current.value if current else None
    c.say(f"     {key.key}={value} versions={len(chain)} latest={chain[-1].provenance}")
    c.check(
        current is not None and current.value == key.value and len(chain) == 2,
        "current value is the correction",
    )
    guess = m.remember(vet, key.owner, "pet/doudou/breed_guess", "可能混有喜乐蒂血统", "model_inference")
    c.check(not guess.persisted, "a model inference is a candidate, not stored")

    c.say("11. Citation check: one verbatim quote, one invented")
    answer = load_sample_citations("clinic")[0]
    report = m.check_citations(vet, list(answer.citations))
    c.say(f"     verdicts {[x.verdict for x in report.checks]}, precision {report.precision}")
    c.check([x.verdict for x in report.checks] == ["ok", "quote_not_found"], "the broken citation is caught")

    c.say("12. Delete the shop session; the receipt is verified against every store")
    receipt = m.delete_session(shop_admin, shop_session.session_id)
    check = m.verify_deleted(shop_admin, receipt)
    c.say(f"     receipt: {receipt.counts}")
    c.check(check.ok, "nothing of it remains in the archive, the index or the outbox")
    gone = m.search(shop, "carrier timeout tracking", kinds=["tool_result"])
    c.check(not gone.hits, "its note is no longer found")

    c.say("13. Audit chains and fsck")
    c.check(
        m.archive.verify_audit(clinic_admin).ok and m.archive.verify_audit(shop_admin).ok,
        "audit chains intact",
    )
    c.check(run_fsck(m).ok, "index and archive agree")
    return not c.failures


def _context_step(m: Mnemo, c: Checks, shop: Principal, session_id: str, ids: dict[str, str]) -> None:
    c.say("9. The investigation's task state, and its working context under a token budget")
    first = next(iter(ids.values()))
    m.update_task_state(
        shop,
        session_id,
        goal="find out why the order is late",
        constraints=["investigate only; never submit a refund"],
        confirmed=[{"fact": "the order was looked up", "evidence_id": f"result:{session_id}/{first}"}],
        unresolved=["the carrier query timed out; delivery status unknown"],
    )
    try:
        # An unknown rewritten as a definite outcome, with nothing to show for it.
        m.update_task_state(
            shop, session_id, goal="find out why the order is late", unresolved=["delivery failed"]
        )
        c.check(False, "turning the unknown into 'delivery failed' is refused")
    except TaskStateRejected as e:
        codes = sorted({p["problem"] for p in e.problems})
        c.say(f"     refused: {', '.join(codes)}")
        c.check(
            {"constraint_dropped", "open_item_dropped"} <= set(codes),
            "turning the unknown into 'delivery failed' (and dropping the constraint) is refused",
        )
    ctx = m.context(shop, session_id, budget_tokens=4_000, instructions="You investigate late orders.")
    totals = ", ".join(f"{k} {v}" for k, v in ctx.totals.items() if v)
    c.say(f"     {ctx.used_tokens} tokens ({ctx.tokenizer}): {totals}; left out {len(ctx.left_out)}")
    kinds = [s.kind for s in ctx.segments]
    c.check(
        kinds[:3] == ["instructions", "constraints", "task_state"] and "archived_stub" in kinds,
        "constraints and task state come first, the archived log stays as its stub",
    )
    c.check(ctx.used_tokens <= 4_000 - ctx.output_reserve, "it fits the budget, the output reserve kept")
    try:
        m.context(shop, session_id, budget_tokens=ctx.pinned_tokens // 2, output_reserve=0)
        c.check(False, "a budget below the pinned part is refused")
    except ContextOverBudget as e:
        c.check(e.detail["pinned_tokens"] > ctx.pinned_tokens // 2, f"refused: {e.message[:80]}…")


def main(data_dir: Path | None = None, *, embedder: Embedder | None = None) -> int:
    try:
        ok = run(data_dir, embedder=embedder)
    except MnemoError as e:
        print(f"FAIL: {e}")
        return 1
    print("PASS: mnemo-sea demo" if ok else "FAIL: mnemo-sea demo (see the failed checks above)")
    return 0 if ok else 1
