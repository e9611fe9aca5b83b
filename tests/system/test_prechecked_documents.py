"""Validate once: a version an archive write of this process made is indexed from a document
built without the index's checks (`EvidenceDocument.prechecked`, called by
mnemo_sea/system/projection/index_documents.py for `EvidenceBatch.made`). That is only sound
while the archive's rules for those fields are the index's or stricter. These tests hold the two
layers' rules so, hold every such document equal to the one the checks build, and show that
what is read back from storage is still checked.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, update

from mnemo_sea.archive import Archive, EvidenceInput, InvalidBatch, Principal, Role, Sensitivity
from mnemo_sea.archive.rules import principal as archive_principal
from mnemo_sea.archive.rules import refs as archive_refs
from mnemo_sea.archive.rules.checks import LABEL_CONTROL
from mnemo_sea.archive.rules.records import EVIDENCE_KINDS, EvidenceStatus
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.retrieval import EvidenceDocument
from mnemo_sea.retrieval import evidence as retrieval_evidence
from mnemo_sea.retrieval import fields as retrieval_fields
from mnemo_sea.retrieval.evidence import sha256_hex
from mnemo_sea.retrieval.filters import tenant_filter
from mnemo_sea.system.fsck import run_fsck
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.projection.index_documents import evidence_document

AGENT = Principal("prechecked", "loader", frozenset({Role.AGENT}), Sensitivity.RESTRICTED)


# ---- the archive's rules are the index's, or stricter ----------------------------------------------


def test_an_archive_identifier_is_an_index_identifier() -> None:
    """Tenant ids and owners: the same pattern, the archive's anchored for `match` as well."""
    assert archive_principal._ID.pattern == f"^{retrieval_fields.IDENTIFIER.pattern}$"


@given(st.from_regex(archive_refs.EVIDENCE_ID, fullmatch=True))
def test_every_evidence_id_the_archive_takes_is_one_the_index_takes(evidence_id: str) -> None:
    assert archive_refs.check_evidence_id(evidence_id) == evidence_id
    assert retrieval_fields.evidence_id(evidence_id) == evidence_id


def test_every_kind_status_and_sensitivity_of_a_record_is_one_the_index_takes() -> None:
    assert set(EVIDENCE_KINDS) <= retrieval_fields.KINDS
    assert set(get_args(EvidenceStatus)) <= retrieval_fields.STATUSES
    assert all(type(int(level)) is int and int(level) >= 0 for level in Sensitivity)
    # Labels (source, scope): tests/system/test_input_caps.py holds the length and the control
    # characters equal; the archive also refuses a blank label, as the index does.
    assert LABEL_CONTROL.pattern == retrieval_fields._CONTROL.pattern


# ---- each document built without the checks is the one the checks build -------------------------

_CONTROL = "".join(chr(c) for c in [*range(0x20), 0x7F])
labels = st.text(st.characters(codec="utf-8", exclude_characters=_CONTROL), min_size=1, max_size=40).filter(
    str.strip
)
identifiers = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:@-]{0,20}\Z")
moments = st.datetimes(
    min_value=datetime(1990, 1, 1),
    max_value=datetime(9999, 12, 1),  # far from now, a float second's step is microseconds long
    timezones=st.sampled_from(
        [UTC, timezone(timedelta(hours=8)), timezone(timedelta(hours=-5, minutes=-30))]
    ),
)
# How long after its start a window ends: a few microseconds (at or under the index's float
# step in the far future), or seconds to years.
spans = st.integers(1, 12).map(lambda us: timedelta(microseconds=us)) | st.integers(1, 10**9).map(
    lambda s: timedelta(seconds=s)
)


@st.composite
def items(draw: st.DrawFn) -> EvidenceInput:
    valid_from = draw(st.none() | moments)
    valid_until = draw(st.none() | moments)
    if valid_from is not None and (valid_until is None or valid_until <= valid_from) and draw(st.booleans()):
        try:
            valid_until = valid_from + draw(spans)
        except OverflowError:
            valid_until = None
    if valid_from is not None and valid_until is not None and valid_until <= valid_from:
        valid_until = None
    return EvidenceInput(
        # A few ids, so one record often gets several versions (the earlier superseded).
        body=draw(st.text(min_size=0, max_size=80) | st.sampled_from(["同一份处方依据", "same text"])),
        source=draw(labels),
        evidence_id=draw(st.sampled_from(["kb:a", "kb/b@2", "c#1"]) | st.none()),
        scope=draw(labels),
        kind=draw(st.sampled_from(EVIDENCE_KINDS)),
        sensitivity=draw(st.sampled_from(list(Sensitivity))),
        owner=draw(st.none() | identifiers),
        valid_from=valid_from,
        valid_until=valid_until,
    )


@pytest.fixture(scope="module")
def archive() -> Iterator[Archive]:
    with tempfile.TemporaryDirectory(prefix="prechecked-") as tmp:
        opened = Archive.open(str(Path(tmp) / "archive.db"))
        try:
            yield opened
        finally:
            opened.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=st.lists(st.lists(items(), min_size=1, max_size=4), min_size=1, max_size=3))
def test_a_made_version_gives_the_document_the_checks_give(
    archive: Archive, writes: list[list[EvidenceInput]]
) -> None:
    """Whatever the archive stores (a later write, or a later item of a batch, supersedes
    versions as ids repeat), the document built without the checks equals the checked one field
    for field, and passes the checks itself. Each example writes for a tenant of its own, so it
    replays alike however many ran before it."""
    writer = Principal(f"p-{uuid.uuid4().hex}", "loader", frozenset({Role.AGENT}), Sensitivity.RESTRICTED)
    for batch in writes:
        try:
            written = archive.write_evidence_batch(writer, batch)
        except InvalidBatch:
            continue  # refused at the door: nothing was made, nothing is indexed
        for record, content in written.made.values():
            prechecked = evidence_document(writer.tenant_id, record, content, made_here=True)
            checked = evidence_document(writer.tenant_id, record, content)
            assert prechecked == checked
            if prechecked is not None:
                assert vars(prechecked) == vars(checked)  # the same values, no field left out
                assert prechecked.content_sha256 == sha256_hex(prechecked.text)
                assert type(prechecked.sensitivity) is int


def test_prechecked_sets_every_field_of_the_document() -> None:
    """A field added to EvidenceDocument must be added to `prechecked` too, or its documents lack it."""
    doc = EvidenceDocument("t", "e", 1, "text", content_sha256=sha256_hex("text"))
    built = EvidenceDocument.prechecked(
        "t",
        "e",
        1,
        "text",
        kind=doc.kind,
        source=doc.source,
        scope=doc.scope,
        owner=doc.owner,
        sensitivity=doc.sensitivity,
        status=doc.status,
        valid_from=doc.valid_from,
        valid_until=doc.valid_until,
        content_sha256=doc.content_sha256,
    )
    assert vars(built) == vars(doc)


# ---- only what this process made goes unchecked ----------------------------------------------------


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The evidence ids of every document whose checks ran."""
    ran: list[str] = []
    original = retrieval_evidence.EvidenceDocument.__post_init__

    def counted(self: EvidenceDocument) -> None:
        ran.append(self.evidence_id)
        original(self)

    monkeypatch.setattr(retrieval_evidence.EvidenceDocument, "__post_init__", counted)
    return ran


def _bodies(n: int, prefix: str) -> list[EvidenceInput]:
    return [
        EvidenceInput(body=f"{prefix} note {i} about otters", source="kb/otters", evidence_id=f"{prefix}-{i}")
        for i in range(n)
    ]


def test_an_ingest_indexes_its_versions_without_checking_them_again(mnemo: Mnemo, checks: list[str]) -> None:
    report = mnemo.ingest(AGENT, _bodies(4, "made"))
    assert report.index is not None and (report.index.applied, report.index.failed) == (5, 0)
    assert checks == []
    points = mnemo.index.backend.matching(tenant_filter(AGENT.tenant_id))
    assert sorted(p.evidence_id for _, p in points) == [f"made-{i}" for i in range(4)]


def test_versions_read_back_from_storage_are_checked(mnemo: Mnemo, checks: list[str]) -> None:
    """Rows of a write this drain was not handed (another process's, or written before a crash)
    are read back, and their documents checked: a stored value the index refuses (a control
    character an older release let into a source) fails its row instead of reaching the index."""
    mnemo.archive.write_evidence_batch(AGENT, _bodies(3, "stored"))  # no drain: rows left pending
    with mnemo.archive.store.write() as conn:
        conn.execute(
            update(t.evidence)
            .where(t.evidence.c.tenant_id == AGENT.tenant_id, t.evidence.c.evidence_id == "stored-1")
            .values(source="kb/\totters")
        )
    report = mnemo.sync()
    assert set(checks) == {"stored-0", "stored-1", "stored-2"}
    assert report.failed >= 1 and report.pending == 1  # sync tries it again, and it stays pending
    points = mnemo.index.backend.matching(tenant_filter(AGENT.tenant_id))
    assert sorted(p.evidence_id for _, p in points) == ["stored-0", "stored-2"]
    with mnemo.archive.store.read() as conn:
        pending: list[Any] = list(
            conn.execute(
                select(t.outbox.c.entity_ref, t.outbox.c.last_error).where(
                    t.outbox.c.tenant_id == AGENT.tenant_id, t.outbox.c.done_at.is_(None)
                )
            )
        )
    assert [ref for ref, _ in pending] == ["stored-1@1"]
    assert "source" in pending[0][1]


def test_a_window_the_index_cannot_tell_from_nothing_answers_at_no_moment(mnemo: Mnemo) -> None:
    """A microsecond in the year 3000 is a window the archive keeps and the index, counting float
    seconds (a step of 4 us there), cannot hold: the version is not indexed, as one that expired
    before it was recorded, by either way of building its document, and fsck finds nothing."""
    start = datetime(3000, 1, 1, tzinfo=UTC)
    far = EvidenceInput(
        body="a window too short to index",
        source="kb/far",
        evidence_id="far",
        valid_from=start,
        valid_until=start + timedelta(microseconds=1),
    )
    report = mnemo.ingest(AGENT, [far, EvidenceInput(body="otters", source="kb/otters", evidence_id="near")])
    assert report.index is not None and (report.index.failed, report.index.pending) == (0, 0)
    record, content = mnemo.archive.get_evidence(AGENT, "far", with_content=True)
    assert content is not None and record.valid_until is not None  # kept as given
    assert evidence_document(AGENT.tenant_id, record, content) is None
    points = mnemo.index.backend.matching(tenant_filter(AGENT.tenant_id))
    assert sorted(p.evidence_id for _, p in points) == ["near"]
    mnemo.sync()
    assert run_fsck(mnemo).problems == ()
