"""A session's task state: versioned, validated whole against the current version, and removed
with what it cites.

Every refused write is checked against the raw tables (nothing stored); every accepted one
against the rows it wrote. The cascade is checked on the raw `body_json` and `task_state_refs`
of every version, and with a marker that must leave no trace in any table.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from leftovers import new_marker, scan_database
from sqlalchemy import func, select, update

from mnemo_sea.archive import (
    Archive,
    ConfirmedFact,
    EvidenceInput,
    Forbidden,
    IdempotencyMismatch,
    NotFound,
    Principal,
    ReleasedItem,
    Role,
    Sensitivity,
    StateConflict,
    TaskState,
    TaskStateRejected,
)
from mnemo_sea.archive.rules.task_state_rules import MAX_ITEMS, TEXT_LIMIT, check_update, parse_proposal
from mnemo_sea.archive.storage import schema as t

S = "run-17"
UNKNOWN = "logistics query timed out, delivery status unknown"
NO_REFUND = "investigate only, do not submit a refund"
GOAL = "investigate the delivery delay of O-1042"


# ---- helpers -------------------------------------------------------------------------------


def put(archive: Archive, who: Principal, eid: str, body: str, **kw: Any) -> int:
    return archive.put_evidence(who, EvidenceInput(evidence_id=eid, body=body, source="oms", **kw)).version


def raw_count(archive: Archive, table: Any) -> int:
    with archive.store.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def raw_counts(archive: Archive) -> tuple[int, int, int]:
    return (
        raw_count(archive, t.task_states),
        raw_count(archive, t.task_state_refs),
        raw_count(archive, t.sessions),
    )


def bodies(archive: Archive, session_id: str = S) -> dict[int, dict[str, Any]]:
    with archive.store.read() as conn:
        rows = conn.execute(
            select(t.task_states.c.version, t.task_states.c.body_json).where(
                t.task_states.c.session_id == session_id
            )
        )
        return {r.version: json.loads(r.body_json) for r in rows}


def raw_bodies(archive: Archive, session_id: str = S) -> dict[int, str]:
    with archive.store.read() as conn:
        rows = conn.execute(
            select(t.task_states.c.version, t.task_states.c.body_json).where(
                t.task_states.c.session_id == session_id
            )
        )
        return {r.version: r.body_json for r in rows}


def refs(archive: Archive) -> set[tuple[str, int, str]]:
    with archive.store.read() as conn:
        rows = conn.execute(select(t.task_state_refs))
        return {(r.session_id, r.version, r.ref) for r in rows}


def facts_of(body: dict[str, Any]) -> list[str]:
    return [c["fact"] for c in body["confirmed"]]


def first_state(archive: Archive, agent: Principal) -> TaskState:
    """The design note's order task: shipped (evidence), delivery unknown, investigate only."""
    put(archive, agent, "order:O-1042", "status: shipped")
    return archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        confirmed=[{"fact": "the order has shipped", "evidence_id": "order:O-1042"}],
        unresolved=[UNKNOWN],
        constraints=[NO_REFUND],
        trace_ref="run-17/events/1-8",
    )


def rejected(archive: Archive, who: Principal, **kw: Any) -> list[dict[str, Any]]:
    """Refused whole: TaskStateRejected, and not one row written anywhere."""
    before = raw_counts(archive)
    with pytest.raises(TaskStateRejected) as err:
        archive.update_task_state(who, kw.pop("session_id", S), **kw)
    assert raw_counts(archive) == before
    e = err.value
    assert e.code == "task_state_rejected" and e.detail["problems"] == e.problems
    assert f"{len(e.problems)} problem(s), nothing was stored" in e.message
    return e.problems


def codes(problems: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(p["field"], p["problem"]) for p in problems]


# ---- refused -------------------------------------------------------------------------------


def test_a_constraint_dropped_silently_is_refused(archive: Archive, agent: Principal) -> None:
    first_state(archive, agent)
    problems = rejected(
        archive,
        agent,
        goal=GOAL,
        confirmed=[{"fact": "the order has shipped", "evidence_id": "order:O-1042"}],
        unresolved=[UNKNOWN],
    )
    assert codes(problems) == [("constraints", "constraint_dropped")]
    assert problems[0]["item"] == NO_REFUND
    # Rewording a constraint is dropping it too.
    problems = rejected(archive, agent, goal=GOAL, unresolved=[UNKNOWN], constraints=["investigate only"])
    assert codes(problems) == [("constraints", "constraint_dropped")]
    assert archive.task_state(agent, S) == archive.task_state(agent, S, version=1)


def test_an_unknown_state_edited_into_a_definite_one_is_refused(archive: Archive, agent: Principal) -> None:
    """The design note's case: "delivery status unknown" rewritten as "delivery failed"."""
    first_state(archive, agent)
    problems = rejected(archive, agent, goal=GOAL, unresolved=["delivery failed"], constraints=[NO_REFUND])
    assert codes(problems) == [("unresolved", "open_item_dropped")]
    assert problems[0]["item"] == UNKNOWN
    assert "an unknown state cannot become definite without evidence" in problems[0]["message"]
    # Nor by moving the guess into the confirmed facts with evidence that does not exist.
    problems = rejected(
        archive,
        agent,
        goal=GOAL,
        confirmed=[{"fact": "delivery failed", "evidence_id": "carrier:never-queried", "resolves": UNKNOWN}],
        constraints=[NO_REFUND],
    )
    assert codes(problems) == [
        ("confirmed[0].evidence_id", "evidence_not_found"),
        ("unresolved", "open_item_dropped"),
    ]


def test_an_open_pending_operation_dropped_is_refused(archive: Archive, agent: Principal) -> None:
    archive.update_task_state(
        agent, S, goal=GOAL, pending_operations=["investigation submitted, answer unknown"]
    )
    problems = rejected(archive, agent, goal=GOAL)
    assert codes(problems) == [("pending_operations", "open_item_dropped")]


@pytest.mark.parametrize(
    "item",
    [
        {"fact": "the order has shipped"},
        {"fact": "the order has shipped", "evidence_id": None},
        {"fact": "the order has shipped", "evidence_id": "  "},
        ConfirmedFact("the order has shipped", "", None),
    ],
)
def test_a_confirmed_fact_without_evidence_is_refused(archive: Archive, agent: Principal, item: Any) -> None:
    problems = rejected(archive, agent, goal=GOAL, confirmed=[item])
    assert codes(problems) == [("confirmed[0].evidence_id", "evidence_required")]
    assert raw_count(archive, t.sessions) == 0  # not even the session was created


def test_evidence_of_another_tenant_answers_like_a_missing_id(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    put(archive, other_tenant, "kb:theirs", "their secret")
    archive.record(other_tenant, "their-session", "tool", "their result")
    archive.remember(other_tenant, "bob", "pet", "cat", "user_claim")
    problems = rejected(
        archive,
        agent,
        goal=GOAL,
        confirmed=[
            {"fact": "a", "evidence_id": "kb:theirs"},
            {"fact": "b", "evidence_id": "kb:never"},
            {"fact": "c", "evidence_id": "kb:theirs@1"},
            {"fact": "d", "evidence_id": "result:their-session/r1"},
            {"fact": "e", "evidence_id": "memory:bob/pet"},
        ],
    )
    assert [p["problem"] for p in problems] == ["evidence_not_found"] * 5
    assert len({p["message"] for p in problems}) == 1  # the same answer: no oracle


def test_a_summary_is_not_evidence(archive: Archive, agent: Principal) -> None:
    put(archive, agent, "order:O-1042", "status: shipped")
    summary = archive.create_summary(agent, "the order shipped", ["evidence:order:O-1042"])
    problems = rejected(
        archive, agent, goal=GOAL, confirmed=[{"fact": "shipped", "evidence_id": summary.summary_id}]
    )
    assert codes(problems) == [("confirmed[0].evidence_id", "derived_not_evidence")]


def test_release_or_resolves_naming_what_was_not_there_is_unknown_item(
    archive: Archive, agent: Principal
) -> None:
    first_state(archive, agent)
    archive.record(agent, S, "carrier", "delivered at 14:02")
    problems = rejected(
        archive,
        agent,
        goal=GOAL,
        confirmed=[
            {"fact": "delivered", "evidence_id": f"result:{S}/r1", "resolves": UNKNOWN},
            {"fact": "refund path", "evidence_id": f"result:{S}/r1", "resolves": NO_REFUND},
        ],
        constraints=[NO_REFUND],
        release=[{"item": "something never listed", "reason": "done"}],
    )
    assert codes(problems) == [
        ("release[0].item", "unknown_item"),
        ("confirmed[1].resolves", "unknown_item"),  # a constraint is released, not resolved
    ]


def test_released_or_resolved_items_that_stay_listed_are_refused(archive: Archive, agent: Principal) -> None:
    first_state(archive, agent)
    archive.record(agent, S, "carrier", "delivered at 14:02")
    problems = rejected(
        archive,
        agent,
        goal=GOAL,
        confirmed=[{"fact": "delivered", "evidence_id": f"result:{S}/r1", "resolves": UNKNOWN}],
        unresolved=[UNKNOWN],
        constraints=[NO_REFUND],
        release=[{"item": NO_REFUND, "reason": "the customer asked for a refund"}],
    )
    assert codes(problems) == [
        ("release[0].item", "released_but_kept"),
        ("confirmed[0].resolves", "resolved_but_kept"),
    ]


def test_a_stale_expected_version_is_a_conflict_and_writes_nothing(
    archive: Archive, agent: Principal
) -> None:
    first_state(archive, agent)
    state = {"goal": GOAL, "unresolved": [UNKNOWN], "constraints": [NO_REFUND]}
    archive.update_task_state(agent, S, **state, expected_version=1)
    before = raw_counts(archive)
    for stale in (0, 1, 3):
        with pytest.raises(StateConflict) as err:
            archive.update_task_state(agent, S, **state, expected_version=stale)
        assert err.value.detail["current_version"] == 2 and err.value.detail["expected_version"] == stale
    assert raw_counts(archive) == before
    assert archive.update_task_state(agent, S, **state, expected_version=2).version == 3
    # 0 means "no state yet": a first write may insist on it.
    assert archive.update_task_state(agent, "fresh", goal=GOAL, expected_version=0).version == 1
    with pytest.raises(StateConflict):
        archive.update_task_state(agent, "fresh", goal=GOAL, expected_version=0)


def test_every_problem_of_one_write_is_listed(archive: Archive, agent: Principal, admin: Principal) -> None:
    first_state(archive, agent)
    put(archive, admin, "kb:restricted", "need to know", sensitivity="restricted")
    problems = rejected(
        archive,
        agent,
        goal="",
        confirmed=[
            {"fact": "ok", "evidence_id": "order:O-1042"},
            {"fact": "no evidence"},
            {"fact": "x", "evidence_id": "kb:restricted"},
            {"fact": "y", "evidence_id": "kb:missing"},
            {"fact": "z", "evidence_id": "order:O-1042", "colour": "red"},
            "not a mapping",
        ],
        unresolved=["a", "a", 7, "bad\nline"],
        constraints="not a list",
        trace_ref="t" * 1025,
        release=[{"item": "never there", "reason": ""}],
    )
    assert codes(problems) == [
        ("goal", "empty"),
        ("confirmed[1].evidence_id", "evidence_required"),
        ("confirmed[4]", "unknown_field"),
        ("confirmed[5]", "wrong_type"),
        ("unresolved[1]", "duplicate"),
        ("unresolved[2]", "wrong_type"),
        ("unresolved[3]", "invalid_text"),
        ("constraints", "wrong_type"),
        ("trace_ref", "too_long"),
        ("release[0].reason", "reason_required"),
        ("confirmed[2].evidence_id", "evidence_forbidden"),
        ("confirmed[3].evidence_id", "evidence_not_found"),
        ("release[0].item", "unknown_item"),
        ("constraints", "constraint_dropped"),
        ("confirmed", "confirmed_reworded"),  # "ok" replaces the first state's fact on order:O-1042
        ("unresolved", "open_item_dropped"),
    ]
    # Citing evidence above one's clearance is a denied access, and audited like one.
    events = archive.audit_events(admin, limit=1000)
    assert events[-1].action == "denied" and events[-1].target == f"task_state:{S}"


def test_shapes_are_problems_not_crashes(archive: Archive, agent: Principal) -> None:
    problems = rejected(
        archive,
        agent,
        goal=None,
        confirmed=[{"fact": 3, "evidence_id": 4, "resolves": ["x"]}],
        unresolved=["x" * (TEXT_LIMIT + 1), "lone \ud800 surrogate", "", "tab\there"],
        pending_operations=[str(i) for i in range(MAX_ITEMS + 1)],
        trace_ref=12,
        release="everything",
    )
    assert codes(problems) == [
        ("goal", "wrong_type"),
        ("confirmed[0].fact", "wrong_type"),
        ("confirmed[0].evidence_id", "wrong_type"),
        ("confirmed[0].resolves", "wrong_type"),
        ("unresolved[0]", "too_long"),
        ("unresolved[1]", "invalid_text"),
        ("unresolved[2]", "empty"),
        ("unresolved[3]", "invalid_text"),
        ("pending_operations", "too_many"),
        ("trace_ref", "wrong_type"),
        ("release", "wrong_type"),
    ]
    json.dumps(problems)  # every item shown is encodable (the surrogate was replaced)


def test_a_list_too_long_is_one_problem_and_its_items_still_count(archive: Archive, agent: Principal) -> None:
    first_state(archive, agent)
    many = [UNKNOWN, *(f"item {i}" for i in range(MAX_ITEMS))]
    problems = rejected(archive, agent, goal=GOAL, unresolved=many, constraints=[NO_REFUND])
    assert codes(problems) == [("unresolved", "too_many")]  # not also "open_item_dropped"


def test_writing_needs_the_agent_role_and_a_live_session(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    reader = Principal("clinic-a", "bob", frozenset({Role.READER}))
    with pytest.raises(Forbidden):
        archive.update_task_state(reader, S, goal=GOAL)
    archive.update_task_state(agent, S, goal=GOAL, owner="bob")
    with pytest.raises(StateConflict):
        archive.update_task_state(agent, S, goal=GOAL, owner="carol")
    archive.delete_session(admin, S)
    before = raw_counts(archive)
    with pytest.raises(StateConflict):
        archive.update_task_state(agent, S, goal=GOAL)
    assert raw_counts(archive) == before


def test_a_current_version_above_the_writers_clearance_is_not_updated(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    put(archive, admin, "kb:confidential", "need to know", sensitivity="confidential")
    archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        confirmed=[{"fact": "known", "evidence_id": "kb:confidential"}],
        constraints=["c"],
    )
    low = Principal("clinic-a", "agent-2", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
    before = raw_counts(archive)
    with pytest.raises(Forbidden):  # its problems would repeat what it may not read
        archive.update_task_state(low, S, goal=GOAL)
    assert raw_counts(archive) == before


# ---- accepted ------------------------------------------------------------------------------


def test_release_with_a_reason_keeps_the_kind_and_the_reason(archive: Archive, agent: Principal) -> None:
    first_state(archive, agent)
    second = archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        confirmed=[{"fact": "the order has shipped", "evidence_id": "order:O-1042"}],
        release=[
            {"item": UNKNOWN, "reason": "the customer cancelled the investigation"},
            ReleasedItem(NO_REFUND, "ignored", "the manager approved a refund"),
        ],
    )
    assert second.released == (
        ReleasedItem(UNKNOWN, "unresolved", "the customer cancelled the investigation"),
        ReleasedItem(NO_REFUND, "constraint", "the manager approved a refund"),
    )
    assert second.unresolved == () and second.constraints == ()
    assert bodies(archive)[2]["released"] == [
        {"item": UNKNOWN, "kind": "unresolved", "reason": "the customer cancelled the investigation"},
        {"item": NO_REFUND, "kind": "constraint", "reason": "the manager approved a refund"},
    ]
    assert archive.task_state(agent, S) == second


def test_an_open_item_settled_by_a_cited_fact(archive: Archive, agent: Principal) -> None:
    first_state(archive, agent)
    result = archive.record(agent, S, "carrier", "delivered at 14:02")
    second = archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        confirmed=[
            {"fact": "the order has shipped", "evidence_id": "order:O-1042"},
            {
                "fact": "delivered at 14:02",
                "evidence_id": f"result:{S}/{result.result_id}",
                "resolves": UNKNOWN,
            },
        ],
        constraints=[NO_REFUND],
    )
    assert second.confirmed[1] == ConfirmedFact(
        "delivered at 14:02", f"result:{S}/r1", None, UNKNOWN, ref=f"result:{S}/r1"
    )
    assert refs(archive) == {
        (S, 1, "evidence:order:O-1042"),
        (S, 2, "evidence:order:O-1042"),
        (S, 2, f"result:{S}/r1"),
    }
    # Carried over with what it settled, the fact is not judged again against version 2.
    third = archive.update_task_state(
        agent, S, goal=GOAL, confirmed=second.confirmed, constraints=[NO_REFUND]
    )
    assert third.confirmed == second.confirmed


def test_moving_an_item_between_unresolved_and_pending_is_allowed(archive: Archive, agent: Principal) -> None:
    first_state(archive, agent)
    moved = archive.update_task_state(
        agent, S, goal=GOAL, pending_operations=[UNKNOWN], constraints=[NO_REFUND]
    )
    assert (moved.unresolved, moved.pending_operations) == ((), (UNKNOWN,))


def test_a_carried_fact_keeps_its_version_and_a_new_one_resolves_the_newest(
    archive: Archive, agent: Principal
) -> None:
    first = first_state(archive, agent)
    assert first.confirmed[0].version == 1
    put(archive, agent, "order:O-1042", "status: delivered")  # version 2 supersedes 1
    second = archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        confirmed=[
            *first.confirmed,  # carried over unchanged (its version 1 is ignored as input)
            {"fact": "the order was delivered", "evidence_id": "order:O-1042"},
            {"fact": "it shipped first", "evidence_id": "order:O-1042@1"},
        ],
        unresolved=[UNKNOWN],
        constraints=[NO_REFUND],
    )
    assert [(c.evidence_id, c.version) for c in second.confirmed] == [
        ("order:O-1042", 1),  # not upgraded: it rests on a version superseded since
        ("order:O-1042", 2),
        ("order:O-1042@1", 1),
    ]
    assert [c["version"] for c in bodies(archive)[2]["confirmed"]] == [1, 2, 1]
    # A retracted version still exists, so a fact carried over on it stays; a new citation of
    # the bare id needs an active version, a citation of the version does not.
    archive.retract(agent, "order:O-1042", "entered in error")
    third = archive.update_task_state(
        agent, S, goal=GOAL, confirmed=second.confirmed, unresolved=[UNKNOWN], constraints=[NO_REFUND]
    )
    assert [c.version for c in third.confirmed] == [1, 2, 1]  # carried: versions kept, v2 retracted
    problems = rejected(
        archive,
        agent,
        goal=GOAL,
        confirmed=[*third.confirmed, {"fact": "v2 said delivered", "evidence_id": "order:O-1042@2"}],
        unresolved=[UNKNOWN],
        constraints=[NO_REFUND],
    )
    # A new citation of the retracted version settles nothing; one of version 1 (superseded,
    # not retracted) is still a citation.
    assert codes(problems) == [("confirmed[3].evidence_id", "evidence_retracted")]
    problems = rejected(
        archive,
        agent,
        goal=GOAL,
        confirmed=[{"fact": "new", "evidence_id": "order:O-1042"}],
        unresolved=[UNKNOWN],
        constraints=[NO_REFUND],
    )
    # The bare id has no active version; and the new text under the same citation rewords the
    # facts it replaces.
    assert codes(problems) == [
        ("confirmed[0].evidence_id", "evidence_not_found"),
        ("confirmed", "confirmed_reworded"),
        ("confirmed", "confirmed_reworded"),
    ]


def test_the_supersede_chain_keeps_every_version_readable(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    first = first_state(archive, agent)
    put(archive, admin, "kb:confidential", "need to know", sensitivity="confidential")
    second = archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        confirmed=[*first.confirmed, {"fact": "known", "evidence_id": "kb:confidential"}],
        unresolved=[UNKNOWN],
        constraints=[NO_REFUND],
    )
    third = archive.update_task_state(
        agent, S, goal="a new goal", unresolved=[UNKNOWN], constraints=[NO_REFUND]
    )
    assert (first.sensitivity, second.sensitivity, third.sensitivity) == (
        Sensitivity.INTERNAL,
        Sensitivity.CONFIDENTIAL,
        Sensitivity.INTERNAL,
    )
    history = archive.task_state_history(agent, S)
    assert [(s.version, s.status) for s in history] == [(1, "superseded"), (2, "superseded"), (3, "current")]
    assert history[0].goal == GOAL and history[0].confirmed == first.confirmed
    assert archive.task_state(agent, S, version=2).confirmed == second.confirmed  # type: ignore[union-attr]
    assert archive.task_state(agent, S) == history[-1] == third
    assert third.label == "derived task state (not original evidence)" and third.created_by == agent.subject
    with archive.store.read() as conn:
        rows = conn.execute(select(t.task_states).order_by(t.task_states.c.version)).all()
    assert [(r.version, r.superseded_at is None, r.sensitivity) for r in rows] == [
        (1, False, 1),
        (2, False, 2),
        (3, True, 1),
    ]
    assert rows[0].superseded_at == rows[1].created_at and rows[1].superseded_at == rows[2].created_at


def test_memory_and_result_citations(archive: Archive, agent: Principal) -> None:
    archive.remember(agent, "bob", "address", "Main St 1", "user_claim")
    archive.remember(agent, "bob", "old", "gone soon", "user_claim", ttl_seconds=30)
    result = archive.record(agent, S, "crm", "bob lives at Main St 1")
    state = archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        confirmed=[
            {"fact": "bob lives at Main St 1", "evidence_id": "memory:bob/address"},
            {"fact": "the CRM says so", "evidence_id": f"result:{S}/{result.result_id}"},
        ],
    )
    assert [c.version for c in state.confirmed] == [None, None]
    assert {r for _, _, r in refs(archive)} == {"memory:bob/address", f"result:{S}/r1"}
    with archive.store.write() as conn:  # the fact's TTL passes (purge has not run yet)
        conn.execute(update(t.memory_facts).values(expires_at=t.memory_facts.c.created_at))
    problems = rejected(archive, agent, goal=GOAL, confirmed=[{"fact": "x", "evidence_id": "memory:bob/old"}])
    assert codes(problems) == [("confirmed[0].evidence_id", "evidence_not_found")]


def test_an_idempotent_retry_returns_the_first_version(archive: Archive, agent: Principal) -> None:
    first_state(archive, agent)
    call = {"goal": GOAL, "unresolved": [UNKNOWN], "constraints": [NO_REFUND]}
    written = archive.update_task_state(agent, S, **call, idempotency_key="ts-2")
    archive.update_task_state(agent, S, **call)  # version 3
    before = raw_counts(archive)
    again = archive.update_task_state(agent, S, **call, idempotency_key="ts-2")
    assert again == written and again.version == 2 and again.status == "current"
    assert raw_counts(archive) == before
    with pytest.raises(IdempotencyMismatch):
        archive.update_task_state(agent, S, **{**call, "goal": "other"}, idempotency_key="ts-2")


# ---- access --------------------------------------------------------------------------------


def test_readers_see_only_their_own_sessions_and_tenants_are_apart(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    archive.update_task_state(agent, S, goal=GOAL, owner="bob")
    bob = Principal("clinic-a", "bob", frozenset({Role.READER}))
    carol = Principal("clinic-a", "carol", frozenset({Role.READER}))
    assert archive.task_state(bob, S) is not None and len(archive.task_state_history(bob, S)) == 1
    with pytest.raises(Forbidden):
        archive.task_state(carol, S)
    with pytest.raises(Forbidden):
        archive.task_state_history(carol, S)
    for call in (
        lambda: archive.task_state(other_tenant, S),
        lambda: archive.task_state_history(other_tenant, S),
    ):
        with pytest.raises(NotFound):
            call()
    with pytest.raises(NotFound):
        archive.task_state(agent, S, version=2)
    with pytest.raises(NotFound):
        archive.task_state(agent, "no-such-session")
    archive.record(agent, "empty", "tool", "x")
    assert archive.task_state(agent, "empty") is None and archive.task_state_history(agent, "empty") == []


def test_a_user_does_not_read_another_owners_data_repeated_in_its_own_task_state(
    archive: Archive, agent: Principal
) -> None:
    """An agent may cite any owner's data; the session's own user then must not read it back
    (summaries keep the same rule)."""
    archive.remember(agent, "carol", "allergy", "penicillin", "user_claim")
    archive.record(agent, "carol-visit", "lab", "carol's lab value", owner="carol")
    bob = Principal("clinic-a", "bob", frozenset({Role.READER}))
    archive.update_task_state(agent, S, goal=GOAL, owner="bob")
    for cited in ("memory:carol/allergy", "result:carol-visit/r1"):
        archive.update_task_state(
            agent, S, goal=GOAL, confirmed=[{"fact": "carol's fact", "evidence_id": cited}]
        )
        with pytest.raises(Forbidden, match="another owner"):
            archive.task_state(bob, S)
        assert archive.task_state(agent, S) is not None
    versions = [v.version for v in archive.task_state_history(bob, S)]
    assert versions == [1]  # only the version citing nothing of carol's


def test_versions_above_clearance_are_forbidden_one_by_one_and_left_out_of_the_history(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    put(archive, admin, "kb:confidential", "need to know", sensitivity="confidential")
    archive.update_task_state(
        agent, S, goal=GOAL, confirmed=[{"fact": "k", "evidence_id": "kb:confidential"}]
    )
    archive.update_task_state(agent, S, goal=GOAL)
    low = Principal("clinic-a", "agent-2", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
    assert [s.version for s in archive.task_state_history(low, S)] == [2]
    assert archive.task_state(low, S) is not None  # the current version is internal
    with pytest.raises(Forbidden):
        archive.task_state(low, S, version=1)
    assert archive.audit_events(admin, limit=1000)[-1].action == "denied"


# ---- the deletion cascade ------------------------------------------------------------------


def _three_versions(archive: Archive, agent: Principal, marker: str) -> None:
    """Versions 1 and 3 cite kb:x (with the marker in the fact), version 2 does not."""
    put(archive, agent, "kb:x", "the deleted evidence")
    put(archive, agent, "kb:y", "evidence that stays")
    x = {"fact": f"fact from x {marker}", "evidence_id": "kb:x"}
    y = {"fact": "fact from y", "evidence_id": "kb:y"}
    archive.update_task_state(agent, S, goal=GOAL, confirmed=[x, y], constraints=[NO_REFUND])
    archive.update_task_state(agent, S, goal=GOAL, confirmed=[y], constraints=[NO_REFUND])
    archive.update_task_state(agent, S, goal=GOAL, confirmed=[y, x], constraints=[NO_REFUND])


def test_deleting_cited_evidence_removes_the_fact_from_every_version(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    marker = new_marker()
    _three_versions(archive, agent, marker)
    untouched = raw_bodies(archive)[2]
    assert "task_states.body_json" in scan_database(archive.store.engine, marker)
    receipt = archive.delete_evidence(admin, "kb:x")
    assert receipt.task_states == ((S, 1), (S, 3)) and receipt.counts["task_states"] == 2
    after = bodies(archive)
    assert [facts_of(after[v]) for v in (1, 2, 3)] == [["fact from y"]] * 3
    assert raw_bodies(archive)[2] == untouched  # a version that did not cite it is not rewritten
    assert after[1]["constraints"] == [NO_REFUND] and after[3]["goal"] == GOAL  # other fields stay
    assert refs(archive) == {(S, v, "evidence:kb:y") for v in (1, 2, 3)}
    assert scan_database(archive.store.engine, marker) == []
    assert archive.verify_deleted(admin, receipt) == []
    assert [c.fact for c in archive.task_state(agent, S).confirmed] == ["fact from y"]  # type: ignore[union-attr]


def test_verify_deleted_names_task_state_leftovers(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    marker = new_marker()
    _three_versions(archive, agent, marker)
    body_before = raw_bodies(archive)[1]
    receipt = archive.delete_evidence(admin, "kb:x")
    with archive.store.write() as conn:
        conn.execute(
            t.task_state_refs.insert().values(
                tenant_id="clinic-a", session_id=S, version=1, ref="evidence:kb:x"
            )
        )
    assert archive.verify_deleted(admin, receipt) == [f"task state {S}@1 cites deleted evidence:kb:x"]
    with archive.store.write() as conn:
        conn.execute(t.task_state_refs.delete().where(t.task_state_refs.c.ref == "evidence:kb:x"))
        conn.execute(update(t.task_states).where(t.task_states.c.version == 1).values(body_json=body_before))
    assert archive.verify_deleted(admin, receipt) == [
        f"task state {S}@1 still holds a fact citing deleted data"
    ]


def test_deleting_a_session_deletes_its_task_states_and_facts_citing_its_results(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    marker = new_marker()
    archive.record(agent, S, "carrier", f"delivered {marker}")
    archive.update_task_state(
        agent,
        S,
        goal=f"goal {marker}",
        confirmed=[{"fact": f"delivered {marker}", "evidence_id": f"result:{S}/r1"}],
    )
    archive.update_task_state(agent, S, goal=f"goal {marker}", unresolved=[f"open {marker}"])
    put(archive, agent, "kb:y", "stays")
    archive.update_task_state(
        agent,
        "other",
        goal=GOAL,
        confirmed=[
            {"fact": f"the carrier said delivered {marker}", "evidence_id": f"result:{S}/r1"},
            {"fact": "stays", "evidence_id": "kb:y"},
        ],
    )
    # A session whose id merely starts like the deleted one's keeps its citations.
    archive.record(agent, f"{S}x", "carrier", "other result")
    archive.update_task_state(
        agent, "third", goal=GOAL, confirmed=[{"fact": "f", "evidence_id": f"result:{S}x/r1"}]
    )

    receipt = archive.delete_session(admin, S)
    assert receipt.task_states == ((S, 1), (S, 2), ("other", 1))
    assert bodies(archive, S) == {}
    assert facts_of(bodies(archive, "other")[1]) == ["stays"]
    assert refs(archive) == {("other", 1, "evidence:kb:y"), ("third", 1, f"result:{S}x/r1")}
    assert scan_database(archive.store.engine, marker) == []
    assert archive.verify_deleted(admin, receipt) == []
    with pytest.raises(NotFound):
        archive.task_state(agent, S)
    # A row put back by hand is named.
    with archive.store.write() as conn:
        conn.execute(
            t.task_states.insert().values(
                tenant_id="clinic-a",
                session_id=S,
                version=1,
                body_json='{"goal": "back", "confirmed": []}',
                created_at=receipt.deleted_at,
                created_by="x",
                sensitivity=1,
                superseded_at=None,
            )
        )
    assert "task states of a deleted session" in archive.verify_deleted(admin, receipt)


def test_forgetting_a_cited_memory_fact_removes_the_facts_citing_it(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    marker = new_marker()
    archive.remember(agent, "bob", "address", f"Main St {marker}", "user_claim")
    archive.remember(agent, "bob", "phone", "555", "user_claim")
    archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        confirmed=[
            {"fact": f"bob lives at Main St {marker}", "evidence_id": "memory:bob/address"},
            {"fact": "bob's phone is 555", "evidence_id": "memory:bob/phone"},
        ],
    )
    receipt = archive.forget(agent, "bob", "address")
    assert receipt.task_states == ((S, 1),)
    assert facts_of(bodies(archive)[1]) == ["bob's phone is 555"]
    assert refs(archive) == {(S, 1, "memory:bob/phone")}
    assert scan_database(archive.store.engine, marker) == []
    assert archive.verify_deleted(admin, receipt) == []


def test_deleting_an_owner_reaches_task_states(archive: Archive, agent: Principal, admin: Principal) -> None:
    marker = new_marker()
    archive.update_task_state(agent, "bobs-session", goal=f"help bob {marker}", owner="bob")
    put(archive, agent, "kb:bob-file", "bob's file", owner="bob")
    archive.remember(agent, "bob", "pet", "cat", "user_claim")
    archive.update_task_state(
        agent,
        "shop",
        goal=GOAL,
        confirmed=[
            {"fact": f"bob's file {marker}", "evidence_id": "kb:bob-file"},
            {"fact": f"bob has a cat {marker}", "evidence_id": "memory:bob/pet"},
        ],
        constraints=["stays"],
    )
    receipt = archive.delete_owner(admin, "bob")
    assert sorted(receipt.task_states) == [("bobs-session", 1), ("shop", 1)]
    assert bodies(archive, "bobs-session") == {}
    assert bodies(archive, "shop")[1]["confirmed"] == [] and bodies(archive, "shop")[1]["constraints"] == [
        "stays"
    ]
    assert refs(archive) == set()
    assert scan_database(archive.store.engine, marker) == []
    assert archive.verify_deleted(admin, receipt) == []


def test_the_next_write_after_a_cascade_is_judged_against_the_rewritten_version(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    """A fact the cascade removed is not "carried over" any more: citing the id again (stored
    anew) resolves it afresh."""
    _three_versions(archive, agent, new_marker())
    archive.delete_evidence(admin, "kb:x")
    put(archive, agent, "kb:x", "stored again")
    fourth = archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        confirmed=[{"fact": "fact from y", "evidence_id": "kb:y"}, {"fact": "again", "evidence_id": "kb:x"}],
        constraints=[NO_REFUND],
    )
    assert [c.version for c in fourth.confirmed] == [1, 1]


# ---- concurrency ---------------------------------------------------------------------------


def _together(n: int, body: Any) -> list[Any]:
    """Run body(i) in n threads released at once; each outcome is its value or its exception."""
    barrier = threading.Barrier(n)

    def run(i: int) -> Any:
        barrier.wait(30)
        try:
            return body(i)
        except Exception as e:  # the outcome is what is compared
            return e

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))


def test_concurrent_writers_on_one_version_exactly_one_wins(archive: Archive, agent: Principal) -> None:
    first_state(archive, agent)
    n = 6
    outcomes = _together(
        n,
        lambda i: archive.update_task_state(
            agent, S, goal=f"writer {i}", unresolved=[UNKNOWN], constraints=[NO_REFUND], expected_version=1
        ),
    )
    won = [o for o in outcomes if isinstance(o, TaskState)]
    assert len(won) == 1 and won[0].version == 2, outcomes
    assert all(isinstance(o, StateConflict) for o in outcomes if o is not won[0]), outcomes
    assert [(s.version, s.status) for s in archive.task_state_history(agent, S)] == [
        (1, "superseded"),
        (2, "current"),
    ]


@pytest.mark.parametrize("kind", ["evidence", "result", "memory"])
def test_a_deletion_racing_writers_that_cite_it_leaves_no_citation(
    archive: Archive, agent: Principal, admin: Principal, kind: str
) -> None:
    """Each writer either commits before the deletion (and the cascade removes its fact) or
    after it (and is refused): no version cites the deleted data afterwards."""
    for round_no in range(3):
        name = f"race-{round_no}"
        if kind == "evidence":
            put(archive, agent, f"kb:{name}", "raced")
            cited, ref = f"kb:{name}", f"evidence:kb:{name}"
            remove: Any = lambda name=name: archive.delete_evidence(admin, f"kb:{name}")  # noqa: E731
        elif kind == "result":
            archive.record(agent, name, "tool", "raced")
            cited = ref = f"result:{name}/r1"
            remove = lambda name=name: archive.delete_session(admin, name)  # noqa: E731
        else:
            archive.remember(agent, "bob", name, "raced", "user_claim")
            cited = ref = f"memory:bob/{name}"
            remove = lambda name=name: archive.forget(admin, "bob", name)  # noqa: E731

        def body(i: int, name: str = name, cited: str = cited, remove: Any = remove) -> Any:
            if i == 0:
                return remove()
            return archive.update_task_state(
                agent, f"{name}-writer-{i}", goal=GOAL, confirmed=[{"fact": "f", "evidence_id": cited}]
            )

        outcomes = _together(6, body)
        receipt = outcomes[0]
        assert not isinstance(receipt, Exception), receipt
        assert all(isinstance(o, TaskState | TaskStateRejected) for o in outcomes[1:]), outcomes
        assert not [r for r in refs(archive) if r[2] == ref]
        assert archive.verify_deleted(admin, receipt) == []
        written = {(o.session_id, o.version) for o in outcomes[1:] if isinstance(o, TaskState)}
        assert set(receipt.task_states) == written


# ---- the rules, pure -----------------------------------------------------------------------


def test_check_update_is_pure_and_judges_the_first_version_alone() -> None:
    proposal, problems = parse_proposal(
        goal=GOAL, unresolved=[UNKNOWN], release=[{"item": "x", "reason": "y"}]
    )
    assert problems == []
    assert codes(check_update(None, proposal, {})) == [("release[0].item", "unknown_item")]
    proposal, _ = parse_proposal(goal=GOAL, unresolved=[UNKNOWN])
    assert check_update(None, proposal, {}) == []


# ---- the reviewer's cases: rewording, retracted evidence, a cascade reopening an unknown ----------


def test_a_confirmed_fact_reworded_under_the_same_evidence_is_refused_unless_released(
    archive: Archive, agent: Principal
) -> None:
    first_state(archive, agent)
    reworded = {"fact": "the order was lost in transit", "evidence_id": "order:O-1042"}
    problems = rejected(
        archive, agent, goal=GOAL, confirmed=[reworded], unresolved=[UNKNOWN], constraints=[NO_REFUND]
    )
    assert codes(problems) == [("confirmed", "confirmed_reworded")]
    assert problems[0]["item"] == "the order has shipped"
    # Dropping it is compression, not rewording; releasing it with a reason lets a new text in.
    dropped = archive.update_task_state(agent, S, goal=GOAL, unresolved=[UNKNOWN], constraints=[NO_REFUND])
    assert dropped.confirmed == ()
    archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        confirmed=[{"fact": "the order has shipped", "evidence_id": "order:O-1042"}],
        unresolved=[UNKNOWN],
        constraints=[NO_REFUND],
    )
    state = archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        confirmed=[reworded],
        unresolved=[UNKNOWN],
        constraints=[NO_REFUND],
        release=[{"item": "the order has shipped", "reason": "the carrier's new scan supersedes it"}],
    )
    assert [r.kind for r in state.released] == ["confirmed"]


def test_a_retracted_version_settles_no_unknown(archive: Archive, agent: Principal) -> None:
    first_state(archive, agent)
    put(archive, agent, "carrier:O-1042", "delivered 2026-11-29 10:02")
    archive.retract(agent, "carrier:O-1042", "scan belonged to another parcel")
    problems = rejected(
        archive,
        agent,
        goal=GOAL,
        confirmed=[
            {"fact": "the order has shipped", "evidence_id": "order:O-1042"},
            {"fact": "delivered on the 29th", "evidence_id": "carrier:O-1042@1", "resolves": UNKNOWN},
        ],
        constraints=[NO_REFUND],
    )
    assert codes(problems) == [
        ("confirmed[1].evidence_id", "evidence_retracted"),
        ("unresolved", "open_item_dropped"),
    ]
    assert "confirmed[1]" in problems[1]["message"] and "does not resolve" in problems[1]["message"]


def test_deleting_the_evidence_that_settled_an_unknown_reopens_it(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    first_state(archive, agent)
    put(archive, agent, "carrier:O-1042", "delivered 2026-11-29 10:02")
    archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        confirmed=[
            {"fact": "the order has shipped", "evidence_id": "order:O-1042"},
            {"fact": "delivered on the 29th", "evidence_id": "carrier:O-1042", "resolves": UNKNOWN},
        ],
        constraints=[NO_REFUND],
    )
    assert archive.task_state(agent, S).unresolved == ()  # type: ignore[union-attr]
    archive.delete_evidence(admin, "carrier:O-1042")
    state = archive.task_state(agent, S)
    assert state is not None
    assert [c.fact for c in state.confirmed] == ["the order has shipped"]
    assert state.unresolved == (UNKNOWN,)  # open again: what settled it is gone
    assert bodies(archive)[2]["unresolved"] == [UNKNOWN]


def test_verify_deleted_reads_every_task_state_body_not_only_those_the_receipt_names(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    """A version whose ref rows were lost is not rewritten by the cascade (it finds citations by
    their ref rows); verify_deleted must still find the fact by what the body cites."""
    marker = new_marker()
    put(archive, agent, "kb:x", f"fact {marker}")
    archive.update_task_state(
        agent, S, goal=GOAL, confirmed=[{"fact": f"x says {marker}", "evidence_id": "kb:x"}]
    )
    with archive.store.write() as conn:
        conn.execute(t.task_state_refs.delete().where(t.task_state_refs.c.ref == "evidence:kb:x"))
    receipt = archive.delete_evidence(admin, "kb:x")
    assert receipt.task_states == ()  # the cascade could not see it
    assert archive.verify_deleted(admin, receipt) == [
        f"task state {S}@1 still holds a fact citing deleted data"
    ]


# ---- a deletion never silently drops an open item from the current version ------------------


def raw_versions(archive: Archive, session_id: str = S) -> dict[int, tuple[str, bool]]:
    """version -> (created_by, superseded), read from the raw table."""
    with archive.store.read() as conn:
        rows = conn.execute(
            select(t.task_states.c.version, t.task_states.c.created_by, t.task_states.c.superseded_at).where(
                t.task_states.c.session_id == session_id
            )
        )
        return {r.version: (r.created_by, r.superseded_at is not None) for r in rows}


def raw_audit(archive: Archive, action: str) -> list[tuple[str, str, dict[str, Any]]]:
    with archive.store.read() as conn:
        rows = conn.execute(
            select(t.audit_events.c.actor, t.audit_events.c.target, t.audit_events.c.detail_json)
            .where(t.audit_events.c.action == action)
            .order_by(t.audit_events.c.seq)
        )
        return [(r.actor, r.target, json.loads(r.detail_json)) for r in rows]


@pytest.mark.parametrize("carried_with_resolves", [False, True])
def test_deleting_a_carried_fact_s_evidence_reopens_the_unknown_in_a_new_current_version(
    archive: Archive, agent: Principal, admin: Principal, carried_with_resolves: bool
) -> None:
    """The audit's repro: an unknown settled by a fact, the fact carried into a later version,
    the fact's evidence deleted. The current version gets the unknown back, as a new audited
    version, and the deleted text is in no row of any table."""
    marker = new_marker()
    first_state(archive, agent)
    shipped = {"fact": "the order has shipped", "evidence_id": "order:O-1042"}
    put(archive, agent, "carrier:O-1042", f"delivered 2026-11-29 10:02 {marker}")
    settling = {
        "fact": f"delivered on the 29th {marker}",
        "evidence_id": "carrier:O-1042",
        "resolves": UNKNOWN,
    }
    archive.update_task_state(agent, S, goal=GOAL, confirmed=[shipped, settling], constraints=[NO_REFUND])
    carried = settling if carried_with_resolves else {k: settling[k] for k in ("fact", "evidence_id")}
    third = archive.update_task_state(
        agent, S, goal=GOAL, confirmed=[shipped, carried], constraints=[NO_REFUND]
    )
    assert third.version == 3 and third.unresolved == ()

    receipt = archive.delete_evidence(admin, "carrier:O-1042")

    versions = raw_versions(archive)
    assert sorted(versions) == [1, 2, 3, 4]
    assert versions[4] == ("admin-1", False) and versions[3] == ("agent-1", True)
    after = bodies(archive)
    assert after[4]["unresolved"] == [UNKNOWN] and facts_of(after[4]) == ["the order has shipped"]
    assert after[4]["constraints"] == [NO_REFUND] and after[4]["goal"] == GOAL and after[4]["released"] == []
    # The old versions are rewritten alike: none claims the unknown vanished unsettled.
    assert [after[v]["unresolved"] for v in (2, 3)] == [[UNKNOWN], [UNKNOWN]]
    assert refs(archive) == {(S, v, "evidence:order:O-1042") for v in (1, 2, 3, 4)}
    current = archive.task_state(agent, S)
    assert current is not None and current.version == 4 and current.unresolved == (UNKNOWN,)
    events = raw_audit(archive, "task_state_reopen")
    assert events == [
        (
            "admin-1",
            f"session:{S}",
            {"version": 4, "superseded": 3, "reopened": 1, "deletion_seq": receipt.audit_seq},
        )
    ]
    assert scan_database(archive.store.engine, marker) == []
    assert archive.verify_deleted(admin, receipt) == []
    # A writer still holding version 3 is told the state moved.
    with pytest.raises(StateConflict):
        archive.update_task_state(agent, S, goal=GOAL, confirmed=[shipped], expected_version=3)


def test_a_deletion_reopens_several_items_where_they_were_and_leaves_what_still_stands(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    """Two unknowns and a pending operation; facts settling them dropped by compression, carried
    without `resolves`, or backed by a second fact that stays."""
    for eid in ("kb:a", "kb:b", "kb:c", "kb:d"):
        put(archive, agent, eid, f"body of {eid}")
    archive.update_task_state(
        agent, S, goal=GOAL, unresolved=["u1", "u2"], pending_operations=["p1"], constraints=[NO_REFUND]
    )
    archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        confirmed=[
            {"fact": "a says u1", "evidence_id": "kb:a", "resolves": "u1"},
            {"fact": "b says p1 done", "evidence_id": "kb:b", "resolves": "p1"},
            {"fact": "c says u2", "evidence_id": "kb:c", "resolves": "u2"},
            {"fact": "d says u2 too", "evidence_id": "kb:d", "resolves": "u2"},
        ],
        constraints=[NO_REFUND],
    )
    # Compression sheds "a says u1"; "b says p1 done" is carried without what it settled.
    archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        confirmed=[
            {"fact": "b says p1 done", "evidence_id": "kb:b"},
            {"fact": "d says u2 too", "evidence_id": "kb:d", "resolves": "u2"},
        ],
        constraints=[NO_REFUND],
    )
    archive.delete_evidence(admin, "kb:a")  # cited by version 2 only
    assert sorted(raw_versions(archive)) == [1, 2, 3, 4]
    assert (bodies(archive)[4]["unresolved"], bodies(archive)[4]["pending_operations"]) == (["u1"], [])
    archive.delete_evidence(admin, "kb:c")  # u2 is still settled by kb:d: nothing reopens
    assert sorted(raw_versions(archive)) == [1, 2, 3, 4]
    archive.delete_evidence(admin, "kb:b")  # p1 goes back among the pending operations
    assert sorted(raw_versions(archive)) == [1, 2, 3, 4, 5]
    after = bodies(archive)
    assert (after[5]["unresolved"], after[5]["pending_operations"]) == (["u1"], ["p1"])
    assert facts_of(after[5]) == ["d says u2 too"]
    assert [(e[2]["version"], e[2]["reopened"]) for e in raw_audit(archive, "task_state_reopen")] == [
        (4, 1),
        (5, 1),
    ]
    state = archive.task_state(agent, S)
    assert state is not None and (state.version, state.unresolved, state.pending_operations) == (
        5,
        ("u1",),
        ("p1",),
    )
    # Rewritten history keeps each version coherent with the one before it.
    assert (after[2]["unresolved"], after[2]["pending_operations"]) == (["u1"], ["p1"])
    assert (after[3]["unresolved"], after[3]["pending_operations"]) == (["u1"], ["p1"])


def test_a_deletion_that_reopens_nothing_adds_no_version(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    _three_versions(archive, agent, new_marker())
    archive.delete_evidence(admin, "kb:x")
    assert sorted(raw_versions(archive)) == [1, 2, 3]
    assert raw_audit(archive, "task_state_reopen") == []


# ---- an open item never becomes definite by moving lists ------------------------------------


def test_an_open_item_listed_as_a_constraint_is_refused(archive: Archive, agent: Principal) -> None:
    """The audit's repro: an open item put among the constraints, with no evidence or release."""
    first_state(archive, agent)
    shipped = {"fact": "the order has shipped", "evidence_id": "order:O-1042"}
    before = raw_count(archive, t.task_states)
    # Listed as a constraint while still open (which was accepted), or moved there (which was
    # refused as a drop): both refused as made definite, one problem each.
    for unresolved in ([UNKNOWN], []):
        problems = rejected(
            archive,
            agent,
            goal=GOAL,
            confirmed=[shipped],
            unresolved=unresolved,
            constraints=[NO_REFUND, UNKNOWN],
        )
        assert codes(problems) == [("constraints[1]", "open_item_made_definite")]
        assert problems[0]["item"] == UNKNOWN
        assert "cannot become definite without evidence" in problems[0]["message"]
        assert "keep it in `unresolved`" in problems[0]["message"]
    assert raw_count(archive, t.task_states) == before
    # Even settled with evidence, the unknown's own text is no constraint.
    put(archive, agent, "carrier:O-1042", "delivered")
    settling = {"fact": "delivered", "evidence_id": "carrier:O-1042", "resolves": UNKNOWN}
    problems = rejected(
        archive, agent, goal=GOAL, confirmed=[shipped, settling], constraints=[NO_REFUND, UNKNOWN]
    )
    assert codes(problems) == [("constraints[1]", "open_item_made_definite")]
    assert raw_count(archive, t.task_states) == before


def test_an_open_item_restated_as_a_confirmed_fact_or_a_pending_one_as_a_constraint_is_refused(
    archive: Archive, agent: Principal
) -> None:
    put(archive, agent, "kb:any", "unrelated")
    archive.update_task_state(
        agent, S, goal=GOAL, unresolved=[UNKNOWN], pending_operations=["refund call sent"]
    )
    before = raw_counts(archive)
    problems = rejected(
        archive,
        agent,
        goal=GOAL,
        confirmed=[{"fact": UNKNOWN, "evidence_id": "kb:any"}],
        unresolved=[UNKNOWN],
        constraints=["refund call sent"],
    )
    assert codes(problems) == [
        ("constraints[0]", "open_item_made_definite"),
        ("confirmed[0].fact", "open_item_made_definite"),
    ]
    assert "keep it in `pending_operations`" in problems[0]["message"]
    assert raw_counts(archive) == before
    # Released with a reason, the item may go; kept open, it stays.
    state = archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        unresolved=[UNKNOWN],
        release=[{"item": "refund call sent", "reason": "the customer withdrew the request"}],
    )
    assert state.version == 2


def test_a_stored_fact_equal_to_an_open_item_carried_over_unchanged_is_accepted(
    archive: Archive, agent: Principal
) -> None:
    """A version the rules before open_item_made_definite accepted: a confirmed fact whose text is
    also still unresolved. Keeping that fact unchanged is no new definite listing (as a held
    constraint is not); a new fact of that text, or the same text on other evidence, still is."""
    first_state(archive, agent)
    with archive.store.write() as conn:  # the old rules' state, written into the stored body
        body = bodies(archive)[1]
        body["unresolved"] = [UNKNOWN, "the order has shipped"]
        conn.execute(
            update(t.task_states).where(t.task_states.c.version == 1).values(body_json=json.dumps(body))
        )
    shipped = {"fact": "the order has shipped", "evidence_id": "order:O-1042"}
    state = archive.update_task_state(
        agent,
        S,
        goal=GOAL,
        confirmed=[shipped],
        unresolved=[UNKNOWN, "the order has shipped"],
        constraints=[NO_REFUND],
    )
    assert state.version == 2 and sorted(bodies(archive)) == [1, 2]  # stored, read raw
    put(archive, agent, "order:O-1043", "status: shipped")
    other = {"fact": "the order has shipped", "evidence_id": "order:O-1043"}
    problems = rejected(
        archive,
        agent,
        goal=GOAL,
        confirmed=[shipped, other],
        unresolved=[UNKNOWN, "the order has shipped"],
        constraints=[NO_REFUND],
    )
    assert ("confirmed[1].fact", "open_item_made_definite") in codes(problems)


@pytest.mark.postgres
def test_a_writer_racing_the_cascade_s_new_version_is_told_to_read_again(
    pg_migrated_url: str, agent: Principal
) -> None:
    """The cascade holds the current version's row, not the session's: a writer that read that
    version before the cascade committed must not supersede it again (and collide on n+1); it
    gets StateConflict and nothing of it is stored."""
    from sqlalchemy import text

    from mnemo_sea.archive.rules.clock import utcnow
    from mnemo_sea.archive.task_state_cascade import rewrite_session

    archive = Archive.open(pg_migrated_url)
    try:
        first_state(archive, agent)
        put(archive, agent, "carrier:O-1042", "delivered")
        shipped = {"fact": "the order has shipped", "evidence_id": "order:O-1042"}
        settling = {"fact": "delivered", "evidence_id": "carrier:O-1042", "resolves": UNKNOWN}
        archive.update_task_state(agent, S, goal=GOAL, confirmed=[shipped, settling], constraints=[NO_REFUND])
        locked, release = threading.Event(), threading.Event()

        def cascade() -> Any:
            with archive.store.write() as conn:
                gone = {2: {"evidence:carrier:O-1042"}}
                reopened = rewrite_session(conn, "clinic-a", S, gone, "admin-1", utcnow())
                locked.set()
                release.wait(60)
                return reopened

        def blocked_writers() -> int:
            with archive.store.engine.connect() as conn:
                return int(
                    conn.execute(
                        text(
                            "SELECT count(*) FROM pg_stat_activity "
                            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                        )
                    ).scalar_one()
                )

        with ThreadPoolExecutor(2) as pool:
            deleting = pool.submit(cascade)
            assert locked.wait(60)
            writing = pool.submit(
                archive.update_task_state, agent, S, goal=GOAL, confirmed=[shipped], constraints=[NO_REFUND]
            )
            # Let the cascade commit only once the writer waits on the row it holds.
            for _ in range(6000):
                if blocked_writers() or writing.done():
                    break
                threading.Event().wait(0.01)
            release.set()
            assert deleting.result(60) is not None
            with pytest.raises(StateConflict):
                writing.result(60)
        versions = raw_versions(archive)
        assert sorted(versions) == [1, 2, 3] and versions[3] == ("admin-1", False)
        assert bodies(archive)[3]["unresolved"] == [UNKNOWN]
    finally:
        archive.close()
