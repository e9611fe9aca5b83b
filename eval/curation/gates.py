"""The safety gate of design note 000, as pass/fail checks run once per `eval context`.

Before any saving counts, reversible archiving must be safe:
- cross_tenant_recover: recovering another tenant's archived result is refused as NotFound (the
  same answer as a missing id) and appends nothing;
- tampered_original: an original whose stored bytes changed is refused (IntegrityFailure),
  nothing is appended, and the failure is in the tenant's audit chain;
- bad_batch: a batch with one bad target changes nothing (raw table counts before and after);
- store_down: with the archive unreachable the archive raises StoreUnavailable and the harness
  assembles that turn from its own full history, recorded as a fallback.

Each check runs in a fresh embedded Mnemo and catches whatever happens, so a broken guarantee
is a failed check with its reason, never a crash of the experiment.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, create_engine, text

from mnemo_sea.archive import (
    BatchRejected,
    IntegrityFailure,
    NotFound,
    Principal,
    Role,
    Sensitivity,
    StoreUnavailable,
)
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder
from mnemo_sea.system.wiring.layout import ARCHIVE_FILE

from .arms import ARCHIVE_SCRIPTED, FULL, Arm
from .runner import replay, store_unreachable
from .trace import Archive, Fault, Need, ToolCall, Trace

TENANT = "gate-clinic"
OTHER_TENANT = "gate-other"
SESSION = "gate-s1"
# The tables an archive or recovery touches. The gates read them (and tamper with a blob) on a
# connection of their own to the archive's SQLite file, as an outside auditor would: through
# the stored schema, never through the archive's code.
_TABLES = ("tool_results", "archive_entries", "outbox", "audit_events", "blobs")


@dataclass(frozen=True)
class GateCheck:
    name: str
    passed: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "reason": self.reason}


@dataclass(frozen=True)
class GateReport:
    checks: tuple[GateCheck, ...]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "checks": [c.to_dict() for c in self.checks]}


def _agent(tenant: str = TENANT) -> Principal:
    return Principal(tenant, "agent", frozenset({Role.AGENT}), Sensitivity.INTERNAL)


def _admin(tenant: str = TENANT) -> Principal:
    return Principal(tenant, "admin", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)


@dataclass(frozen=True)
class Opened:
    """A gate's fresh system and the path of its archive's database file."""

    mnemo: Mnemo
    database: Path


@contextmanager
def _raw(database: Path) -> Iterator[Connection]:
    engine = create_engine(f"sqlite+pysqlite:///{database}")
    try:
        with engine.begin() as conn:
            yield conn
    finally:
        engine.dispose()


def table_counts(database: Path) -> dict[str, Any]:
    """Row counts of the tables an archive or recovery touches, and the results' states."""
    with _raw(database) as conn:
        out: dict[str, Any] = {
            table: conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()  # noqa: S608 - fixed names
            for table in _TABLES
        }
        rows = conn.execute(
            text("SELECT tenant_id, result_no, state FROM tool_results ORDER BY tenant_id, result_no")
        )
        out["states"] = [tuple(r) for r in rows]
    return out


def _session(mnemo: Mnemo) -> None:
    agent = _agent()
    mnemo.record(agent, SESSION, "lab.report", "potassium 4.1 mmol/L", owner="pet-7")
    mnemo.record(agent, SESSION, "notes", "owner prefers morning calls", owner="pet-7")
    mnemo.archive_results(agent, SESSION, [("r1", "lab report: potassium"), ("r2", "owner contact notes")])


def check_cross_tenant_recover(opened: Opened) -> GateCheck:
    mnemo = opened.mnemo
    name = "cross_tenant_recover"
    _session(mnemo)
    before = table_counts(opened.database)
    try:
        got = mnemo.recover(_agent(OTHER_TENANT), SESSION, "r1")
    except NotFound:
        after = table_counts(opened.database)
        if after != before:
            return GateCheck(name, False, "refused with NotFound, but the tables changed")
        return GateCheck(
            name, True, "another tenant's recover of r1 was refused as NotFound; nothing appended"
        )
    return GateCheck(
        name, False, f"another tenant recovered r1 ({got.appended.result_id}, {len(got.content)} bytes)"
    )


def check_tampered_original(opened: Opened) -> GateCheck:
    mnemo = opened.mnemo
    name = "tampered_original"
    _session(mnemo)
    agent = _agent()
    original = mnemo.archive.list_results(agent, SESSION)[0]
    with _raw(opened.database) as conn:
        conn.execute(
            text("UPDATE blobs SET content = :content WHERE tenant_id = :tenant AND sha256 = :sha256"),
            {"content": b"potassium 9.9 mmol/L", "tenant": TENANT, "sha256": original.content_sha256},
        )
    before = table_counts(opened.database)
    try:
        got = mnemo.recover(agent, SESSION, "r1")
    except IntegrityFailure:
        events = mnemo.archive.audit_events(_admin())
        audited = any(e.action == "integrity_failure" and e.target == f"session:{SESSION}/r1" for e in events)
        after = table_counts(opened.database)
        # The audit event is the one row the refusal may add.
        grown = after["audit_events"] == before["audit_events"] + 1
        same = {k: v for k, v in after.items() if k != "audit_events"} == {
            k: v for k, v in before.items() if k != "audit_events"
        }
        if not audited or not grown:
            return GateCheck(
                name, False, "refused with IntegrityFailure, but no integrity_failure was audited"
            )
        if not same:
            return GateCheck(name, False, "refused with IntegrityFailure, but other tables changed")
        return GateCheck(
            name, True, "the tampered r1 was refused (IntegrityFailure), audited, nothing appended"
        )
    return GateCheck(name, False, f"the tampered original was served ({got.content[:40]!r})")


def check_bad_batch(opened: Opened) -> GateCheck:
    mnemo = opened.mnemo
    name = "bad_batch"
    agent = _agent()
    mnemo.record(agent, SESSION, "lab.report", "potassium 4.1 mmol/L", owner="pet-7")
    mnemo.record(agent, SESSION, "notes", "owner prefers morning calls", owner="pet-7")
    before = table_counts(opened.database)
    try:
        mnemo.archive_results(agent, SESSION, [("r1", "lab report"), ("r9", "no such result")])
    except BatchRejected as e:
        after = table_counts(opened.database)
        if after != before:
            changed = sorted(k for k in after if after[k] != before[k])
            return GateCheck(name, False, f"the batch was rejected but changed {', '.join(changed)}")
        statuses = ", ".join(f"{s.result_id} {s.status}" for s in e.targets)
        return GateCheck(name, True, f"rejected whole ({statuses}); table counts unchanged")
    except Exception as e:  # noqa: BLE001 - any other outcome is a failed check, with its reason
        after = table_counts(opened.database)
        return GateCheck(
            name, False, f"raised {type(e).__name__} instead of BatchRejected; unchanged={after == before}"
        )
    return GateCheck(name, False, "a batch naming an unknown result was accepted")


GATE_TRACE = Trace(
    trace_id="gate-store-down",
    family="gate",
    tenant=TENANT,
    session_id=SESSION,
    owner="pet-7",
    instructions="Answer from the evidence.",
    goal="check the store-down fallback",
    constraints=(),
    events=(
        ToolCall(
            "lab",
            "lab.report",
            {"pet": "pet-7"},
            "potassium 4.1 mmol/L",
            "default",
            datetime(2026, 11, 30, 9, tzinfo=UTC),
            "lab report: potassium",
        ),
        ToolCall(
            "notes",
            "notes.get",
            {},
            "owner prefers morning calls",
            "default",
            datetime(2026, 11, 30, 9, 5, tzinfo=UTC),
            "owner contact notes",
        ),
        Archive(("lab",)),
        Fault("store_down"),
        Need("potassium", "potassium 4.1 mmol/L", "lab", "potassium"),
    ),
)


def check_store_down(work_dir: Path | None = None) -> GateCheck:
    """Replays GATE_TRACE under the scripted archive arm: the turn after the fault must be a
    fallback whose history is the full arm's, and the need it serves must be satisfied."""
    name = "store_down"
    with (
        tempfile.TemporaryDirectory(dir=work_dir) as tmp,
        Mnemo.open(tmp, embedder=HashingEmbedder()) as mnemo,
    ):
        mnemo.record(_agent(), SESSION, "lab.report", "potassium 4.1 mmol/L")
        with store_unreachable(mnemo):
            try:
                mnemo.live_view(_agent(), SESSION)
                raised = False
            except StoreUnavailable:
                raised = True
    if not raised:
        return GateCheck(
            name, False, "with the store unreachable, the archive did not raise StoreUnavailable"
        )
    archived = replay(GATE_TRACE, Arm(ARCHIVE_SCRIPTED), work_dir=work_dir)
    full = replay(GATE_TRACE, Arm(FULL), work_dir=work_dir)
    last = archived.prompts[-1]
    if not last.fallback:
        return GateCheck(name, False, "the turn after the store went down was not recorded as a fallback")
    history = [s for s in last.segments if s[0] in ("live_result", "protected_result")]
    full_history = [s for s in full.prompts[-1].segments if s[0] in ("live_result", "protected_result")]
    if history != full_history:
        return GateCheck(name, False, "the fallback turn's history is not the full history")
    if not archived.needs[-1].satisfied:
        return GateCheck(name, False, "the fallback turn did not show the archived original")
    if any(t.fallback for t in archived.prompts[:-1]):
        return GateCheck(name, False, "a turn before the fault was recorded as a fallback")
    return GateCheck(
        name, True, "StoreUnavailable raised; that turn fell back to the full history (recorded)"
    )


def _fresh(check: Callable[[Opened], GateCheck], name: str, work_dir: Path | None) -> GateCheck:
    try:
        with (
            tempfile.TemporaryDirectory(dir=work_dir) as tmp,
            Mnemo.open(tmp, embedder=HashingEmbedder()) as m,
        ):
            return check(Opened(m, Path(tmp) / ARCHIVE_FILE))
    except Exception as e:  # noqa: BLE001 - a crash of a check is its failure, with the reason
        return GateCheck(name, False, f"{type(e).__name__}: {e}")


def run_gate(work_dir: Path | None = None) -> GateReport:
    """The four checks, each in a fresh embedded Mnemo."""
    checks = [
        _fresh(check_cross_tenant_recover, "cross_tenant_recover", work_dir),
        _fresh(check_tampered_original, "tampered_original", work_dir),
        _fresh(check_bad_batch, "bad_batch", work_dir),
    ]
    try:
        checks.append(check_store_down(work_dir))
    except Exception as e:  # noqa: BLE001
        checks.append(GateCheck("store_down", False, f"{type(e).__name__}: {e}"))
    return GateReport(tuple(checks))
