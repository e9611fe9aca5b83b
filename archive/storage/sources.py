"""The sources a derived record names (evidence, a tool result), read for the rules derived records
keep: whose data a summary, a memory fact or a task state repeats, and how sensitive its source is.
Shared by summaries, memory and task state.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, select

from ..rules.errors import InvalidInput
from ..rules.principal import Sensitivity
from ..rules.refs import SourceRef
from ..rules.tool_results import parse_result_id
from . import schema as t
from .blobs import sha256_hex


def source_sensitivity(conn: Connection, tenant: str, ref: SourceRef) -> Sensitivity | None:
    """The sensitivity of an existing source, or None when it does not exist in this tenant."""
    if ref.kind == "evidence":
        row = conn.execute(
            select(t.evidence.c.sensitivity).where(
                t.evidence.c.tenant_id == tenant,
                t.evidence.c.evidence_id == ref.evidence_id,
                t.evidence.c.status == "active",
            )
        ).first()
    else:
        assert ref.result_id is not None
        row = conn.execute(
            select(t.tool_results.c.sensitivity).where(
                t.tool_results.c.tenant_id == tenant,
                t.tool_results.c.session_id == ref.session_id,
                t.tool_results.c.result_no == parse_result_id(ref.result_id),
            )
        ).first()
    return None if row is None else Sensitivity(row.sensitivity)


def source_owner(conn: Connection, tenant_id: str, refs: Sequence[str]) -> str | None:
    """Whose data a derived view (a summary) repeats: None when no source has an owner, the
    owner when they all share one, and a value no principal has when owners differ, so that
    only agents and admins (who act for every owner) find it."""
    owners: set[str] = set()
    for ref in refs:
        try:
            source = SourceRef.parse(ref)
        except InvalidInput:
            continue  # not a source (a memory ref, say): it names no owner here
        if source.kind == "evidence":
            rows = conn.execute(
                select(t.evidence.c.owner).where(
                    t.evidence.c.tenant_id == tenant_id, t.evidence.c.evidence_id == source.evidence_id
                )
            )
            owners.update(r.owner for r in rows if r.owner is not None)
        else:
            row = conn.execute(
                select(t.sessions.c.owner).where(
                    t.sessions.c.tenant_id == tenant_id, t.sessions.c.session_id == source.session_id
                )
            ).first()
            if row is not None:
                owners.add(row.owner)
    if not owners:
        return None
    if len(owners) == 1:
        return owners.pop()
    return "0-shared." + sha256_hex("\n".join(sorted(owners)).encode("utf-8"))[:32]
