"""`mnemo-sea demo`: the archive walk-through on the embedded default (SQLite), no network.

Two tenants (a veterinary clinic and a shop) that never see each other; a session whose
long tool logs are archived with notes; a rejected batch; a refused archive of a vet
approval; an exact recovery with its hash check and a staleness warning; a memory
correction; a deletion with its receipt; the audit chain verified. Each step is checked,
and the run ends with one PASS/FAIL line.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mnemo_sea.archive import (
    Archive,
    ArchiveError,
    BatchRejected,
    NotFound,
    Principal,
    Role,
    Sensitivity,
)

CLINIC_LOG = "\n".join(
    f"2026-11-29T09:{i % 60:02d}:00+08:00 化验系统 查询 犬 血常规 样本 S-{i:04d} 状态=完成 白细胞=正常"
    for i in range(400)
)
SHIP_LOG = "\n".join(
    f"2026-11-29T10:{i % 60:02d}:00Z GET /logistics/track?order=O-1042 attempt={i} -> 504 upstream timeout"
    for i in range(300)
)


@dataclass
class Walkthrough:
    say: Callable[[str], None]
    failures: list[str] = field(default_factory=list)

    def check(self, ok: bool, what: str) -> None:
        self.say(f"  [{'ok' if ok else 'FAIL'}] {what}")
        if not ok:
            self.failures.append(what)


def run(data_dir: Path | None = None, say: Callable[[str], None] = print) -> bool:
    """Run the walk-through; returns True when every check passed."""
    with tempfile.TemporaryDirectory(prefix="mnemo-demo-") as tmp:
        folder = data_dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        archive = Archive.open(str(folder / "archive.db"))
        try:
            return _walk(archive, Walkthrough(say))
        finally:
            archive.close()


def _walk(archive: Archive, w: Walkthrough) -> bool:
    vet = Principal("clinic-yks", "assistant", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
    clinic_admin = Principal("clinic-yks", "dpo", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
    shop = Principal("shop-1042", "investigator", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)

    w.say("1. Record tool results into a clinic session (Chinese) and a shop session (English)")
    lab = archive.record(vet, "visit-7", "lab.query", CLINIC_LOG, arguments={"pet": "旺财", "test": "血常规"})
    approval = archive.record(
        vet,
        "visit-7",
        "vet.approval",
        "兽医 李医生 批准处方：阿莫西林 250mg 每日两次",
        policy_class="vet_approval",
    )
    stock = archive.record(vet, "visit-7", "pharmacy.stock", "阿莫西林 250mg 库存 3 盒", policy_class="stock")
    track = archive.record(shop, "order-O-1042", "logistics.track", SHIP_LOG, arguments={"order": "O-1042"})
    w.check(
        (lab.result_id, approval.result_id, stock.result_id) == ("r1", "r2", "r3"), "stable ids r1, r2, r3"
    )
    w.check(track.result_id == "r1", "the shop's session numbers its own results")

    w.say("2. A batch naming an id that was never issued is rejected whole")
    try:
        archive.archive(vet, "visit-7", [("r1", "血常规正常"), ("r9", "不存在")])
        w.check(False, "batch with r9 rejected")
    except BatchRejected as e:
        w.say(f"     {e.message}")
        w.check(all(r.state == "live" for r in archive.list_results(vet, "visit-7")), "nothing was archived")

    w.say("3. A vet approval is protected: archiving it is refused")
    try:
        archive.archive(vet, "visit-7", [("r2", "已批准")])
        w.check(False, "archive of the vet approval refused")
    except BatchRejected as e:
        w.check(e.targets[0].status == "protected", f"refused with status {e.targets[0].status!r}")

    w.say("4. Archive the long logs with notes; the live view keeps stubs in place")
    before = len(archive.live_view(vet, "visit-7").text)
    archive.archive(
        vet, "visit-7", [("r1", "血常规 400 条全部完成，白细胞正常"), ("r3", "阿莫西林库存 3 盒")]
    )
    view = archive.live_view(vet, "visit-7")
    w.say(f"     live context: {before} -> {len(view.text)} characters")
    w.check('<archived_result id="r1"' in view.text and 'recover_result("r1")' in view.text, "stub names r1")
    w.check("李医生" in view.text, "the vet approval stays live, verbatim")

    w.say("5. Recover: exact original, hash-checked, labelled historical, stock flagged stale")
    back = archive.recover(vet, "visit-7", "r1")
    w.check(back.content == CLINIC_LOG.encode(), "byte-exact original")
    w.check(
        hashlib.sha256(back.content).hexdigest() == lab.content_sha256, "sha256 matches the recorded hash"
    )
    w.check(
        back.appended.result_id == "r4" and 'status="historical"' in back.rendered,
        "appended as r4, historical",
    )
    stale = archive.recover(vet, "visit-7", "r3")
    w.say(f"     {stale.staleness_warning}")
    w.check(
        stale.staleness_warning is not None and "re-query" in stale.staleness_warning, "staleness warning"
    )

    w.say("6. Tenants never see each other")
    try:
        archive.recover(shop, "visit-7", "r1")
        w.check(False, "the shop cannot recover the clinic's result")
    except NotFound:
        w.check(True, "the shop gets NotFound for the clinic's session")

    w.say("7. Memory: a user correction supersedes, the history keeps both")
    archive.remember(vet, "owner-42", "timezone", "UTC", "user_claim")
    archive.remember(vet, "owner-42", "timezone", "Asia/Shanghai", "user_correction")
    current = archive.current(vet, "owner-42", "timezone")
    chain = archive.memory_history(vet, "owner-42", "timezone")
    w.say(f"     current_timezone={current.value if current else None} version_count={len(chain)}")
    w.check(current is not None and current.value == "Asia/Shanghai", "current value is the correction")
    w.check(
        len(chain) == 2 and chain[-1].provenance == "user_correction", "2 versions, latest user_correction"
    )
    guess = archive.remember(vet, "owner-42", "breed", "可能是柯基", "model_inference")
    w.check(not guess.persisted, "a model inference is a candidate, not stored")

    w.say("8. Delete the shop session; the receipt verifies")
    receipt = archive.delete_session(shop, "order-O-1042")
    w.say(f"     receipt: {receipt.counts}")
    w.check(archive.verify_deleted(shop, receipt) == [], "nothing of the session remains")

    w.say("9. The audit chains verify")
    w.check(archive.verify_audit(clinic_admin).ok and archive.verify_audit(shop).ok, "both chains intact")
    return not w.failures


def main(data_dir: Path | None = None) -> int:
    try:
        ok = run(data_dir)
    except ArchiveError as e:
        print(f"FAIL: {e.message}")
        return 1
    print("PASS: archive walk-through" if ok else "FAIL: archive walk-through (see the failed checks above)")
    return 0 if ok else 1
