"""A record's source and scope are the index's labels (retrieval/fields.py `label`): whatever
the archive stores must be indexable, or the record is kept and never searchable while its
outbox row fails on every pass. What the index would refuse is refused at the door, before
anything is stored.

Each test reads the raw tables and the index's points, not only the reports.
"""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from mnemo_sea.archive import EvidenceInput, InvalidBatch, Principal, Role, Sensitivity, limits
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.retrieval.filters import tenant_filter
from mnemo_sea.system.mnemo import Mnemo

AGENT = Principal("labels", "loader", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)


def rows(m: Mnemo) -> dict[str, int]:
    """The tenant's rows in every table an evidence write fills."""
    with m.archive.store.read() as conn:
        return {
            table.name: int(
                conn.execute(
                    select(func.count()).select_from(table).where(table.c.tenant_id == AGENT.tenant_id)
                ).scalar_one()
            )
            for table in (t.evidence, t.blobs, t.outbox)
        }


@pytest.mark.parametrize("field", ["source", "scope"])
@pytest.mark.parametrize("control", ["\t", "\n", "\r", "\x1b", "\x7f"])
def test_a_control_character_in_a_label_refuses_the_batch_and_stores_nothing(
    mnemo: Mnemo, field: str, control: str
) -> None:
    fine = EvidenceInput(body="otters hold hands", source="kb/fine", evidence_id="fine", scope="kb")
    labels = {"source": "kb/bad", "scope": "kb", field: f"left{control}right"}
    bad = EvidenceInput(body="walruses", evidence_id="bad", **labels)
    with pytest.raises(InvalidBatch) as raised:
        mnemo.ingest(AGENT, [fine, bad])
    assert [(p["index"], p["field"]) for p in raised.value.problems] == [(1, field)]
    assert f"control character ({control!r})" in raised.value.problems[0]["problem"]
    assert rows(mnemo) == {"evidence": 0, "blobs": 0, "outbox": 0}
    assert mnemo.index.backend.matching(tenant_filter(AGENT.tenant_id)) == []


def test_the_longest_source_the_archive_takes_is_indexed_and_filters_a_search(mnemo: Mnemo) -> None:
    source = "https://example.org/" + "a" * (limits.SOURCE_CHARS - len("https://example.org/"))
    report = mnemo.ingest(
        AGENT,
        [
            EvidenceInput(body="capybaras bathe at dusk", source=source, evidence_id="long", scope="s" * 255),
            EvidenceInput(body="capybaras nap at noon", source="kb/short", evidence_id="short", scope="kb"),
        ],
    )
    assert report.index is not None and (report.index.failed, report.index.pending) == (0, 0)
    assert rows(mnemo)["evidence"] == 2
    stored = {p.evidence_id: p for _, p in mnemo.index.backend.matching(tenant_filter(AGENT.tenant_id))}
    assert stored["long"].source == source and stored["long"].scope == "s" * 255
    found = mnemo.search(AGENT, "capybaras", sources=[source])
    assert [h.evidence_id for h in found.hits] == ["long"]
