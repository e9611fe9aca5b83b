"""`Mnemo.as_(principal)`: every facade method that takes the principal first, bound to one, with
the facade's parameters after it; calls through it act as that principal."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from fakes import HashingEmbedder

from mnemo_sea.archive import EvidenceInput, Forbidden, Principal, Role, Sensitivity
from mnemo_sea.system.acting import MnemoAs
from mnemo_sea.system.mnemo import Mnemo

AGENT = Principal("clinic", "agent-1", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
READER = Principal("clinic", "pet-7", frozenset({Role.READER}), Sensitivity.INTERNAL)


def _takes_the_principal_first(name: str) -> bool:
    params = list(inspect.signature(getattr(Mnemo, name)).parameters)
    return len(params) > 1 and params[1] == "principal"


def test_every_method_that_takes_the_principal_is_bound_with_the_same_parameters() -> None:
    facade = {n for n in dir(Mnemo) if not n.startswith("_") and callable(getattr(Mnemo, n))}
    acting = {n for n in facade if _takes_the_principal_first(n)} - {"as_"}  # as_ makes the handle
    assert acting and acting <= set(vars(MnemoAs))  # a new facade method must be bound too
    for name in acting:
        theirs = inspect.signature(getattr(Mnemo, name)).parameters
        ours = inspect.signature(getattr(MnemoAs, name)).parameters
        assert [p for p in theirs if p != "principal"] == list(ours), name


def test_calls_through_the_handle_act_as_its_principal(tmp_path: Path) -> None:
    with Mnemo.open(tmp_path, embedder=HashingEmbedder()) as mnemo:
        agent, reader = mnemo.as_(AGENT), mnemo.as_(READER)
        assert repr(agent) == "MnemoAs('agent-1' in tenant 'clinic')"
        recorded = agent.record("visit-1", "lab", "ALT 112", owner="pet-7")
        agent.ingest([EvidenceInput("Refunds within 14 days.", "policy", "kb:refund")])
        assert [h.evidence_id for h in agent.search("refunds", kinds=["knowledge"]).hits] == ["kb:refund"]
        assert reader.list_results("visit-1") == mnemo.list_results(READER, "visit-1") == [recorded]
        with pytest.raises(Forbidden):  # the reader's own rights, not the agent's
            reader.record("visit-1", "lab", "x")
        admin = Principal("clinic", "admin", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
        before = len(mnemo.archive.audit_events(admin))
        agent.archive_results("visit-1", [("r1", "lab")])
        (archived,) = mnemo.archive.audit_events(admin)[before:]
        assert (archived.actor, archived.action) == ("agent-1", "archive")  # in the audit trail
