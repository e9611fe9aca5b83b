"""Excerpt recovery: `recover` with a span brings back exactly those bytes of the original,
hash-verified against the whole original, appended as a historical copy labelled with its lines
and bytes; a span the original cannot satisfy changes nothing and says how big the original is.

Every test against the archive runs on SQLite and PostgreSQL (the `archive` fixture).
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select
from test_recover import snapshot, tamper

from mnemo_sea.archive import (
    Archive,
    Excerpt,
    IdempotencyMismatch,
    IntegrityFailure,
    InvalidInput,
    InvalidSpan,
    Principal,
    Role,
    Sensitivity,
    StateConflict,
)
from mnemo_sea.archive.rules.excerpts import line_count, resolve_span
from mnemo_sea.archive.storage import schema as t

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

# A pytest log: 40 lines, the failure on line 23, a Chinese line with three-byte characters.
LOG = (
    "".join(
        f"tests/test_io.py::test_{n} PASSED\n"
        if n != 23
        else "FAILED tests/test_io.py::test_23 - AssertionError: p99 latency 412 ms > 250 ms\n"
        for n in range(1, 39)
    )
    + "配送超时：物流调查已提交\n=== 1 failed, 37 passed in 2.31s ===\n"
)


def archived(archive: Archive, agent: Principal, content: str | bytes = LOG, **kw: Any) -> str:
    r = archive.record(agent, "s1", "pytest", content, arguments={"path": "tests/"}, observed_at=T0, **kw)
    archive.archive_results(agent, "s1", [(r.result_id, "pytest run: 1 failed")])
    return r.result_id


def lines_of(content: bytes, first: int, last: int) -> bytes:
    """Lines `first` to `last` of `content` (a line ends after its newline), by another method."""
    return b"".join(re.findall(rb"[^\n]*\n|[^\n]+\Z", content)[first - 1 : last])


# ---- the three spans ------------------------------------------------------------------------


def test_a_line_span_brings_back_exactly_those_lines_labelled_with_the_whole_original(
    archive: Archive, agent: Principal
) -> None:
    rid = archived(archive, agent)
    whole = LOG.encode()
    found = archive.recover(agent, "s1", rid, lines=(22, 24))

    assert found.content == lines_of(whole, 22, 24)
    assert b"FAILED tests/test_io.py::test_23" in found.content
    copy = found.appended
    assert copy.recovered_from == rid and copy.state == "live"
    assert copy.content_sha256 == hashlib.sha256(whole).hexdigest() == found.original.content_sha256
    assert copy.size == len(whole)  # the copy names the whole original it was cut from
    assert copy.excerpt == Excerpt(
        whole.index(found.content), whole.index(found.content) + len(found.content), 22, 24
    )

    # The live view shows the excerpt only, labelled with its place in the original.
    shown = archive.live_view(agent, "s1").items[-1].rendered
    assert shown == found.rendered
    assert "lines 22-24 (bytes" in shown and copy.content_sha256 in shown and f"{len(whole)} bytes" in shown
    assert "FAILED tests/test_io.py::test_23" in shown
    assert "test_21 PASSED" not in shown and "1 failed, 37 passed" not in shown
    # The original stays archived; the audit chain names the excerpt.
    assert archive.list_results(agent, "s1")[0].state == "archived"
    admin = Principal("clinic-a", "admin-1", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
    (event,) = [e for e in archive.audit_events(admin) if e.action == "recover"]
    assert event.detail["excerpt"] == copy.excerpt.describe()


def test_a_byte_range_is_exact_and_never_splits_a_character(archive: Archive, agent: Principal) -> None:
    rid = archived(archive, agent)
    whole = LOG.encode()
    start = whole.index("物流".encode())
    found = archive.recover(agent, "s1", rid, byte_range=(start, start + 6))
    assert found.content == "物流".encode()
    assert found.appended.excerpt is not None and found.appended.excerpt.first_line == 39

    before = snapshot(archive)
    with pytest.raises(InvalidSpan, match="inside a UTF-8 character") as e:
        archive.recover(agent, "s1", rid, byte_range=(start + 1, start + 6))
    assert (e.value.field, e.value.lines, e.value.size) == ("byte_range", 40, len(whole))
    assert snapshot(archive) == before


def test_a_binary_original_is_cut_at_any_byte(archive: Archive, agent: Principal) -> None:
    blob = bytes(range(256)) * 4
    rid = archived(archive, agent, blob, media_type="application/octet-stream")
    found = archive.recover(agent, "s1", rid, byte_range=(129, 131))
    assert found.content == bytes([129, 130])
    assert "[binary excerpt: 2 bytes" in found.rendered


def test_a_match_brings_back_the_matching_lines_and_their_neighbours(
    archive: Archive, agent: Principal
) -> None:
    rid = archived(archive, agent)
    whole = LOG.encode()
    exact = archive.recover(agent, "s1", rid, match="p99 latency", around=1)
    assert exact.content == lines_of(whole, 22, 24)

    # Not there as written: the same text ignoring case; no context lines.
    folded = archive.recover(agent, "s1", rid, match="ASSERTIONERROR: P99", around=0)
    assert folded.content == lines_of(whole, 23, 23)

    # A match across a line break covers both lines; context stops at the original's edges.
    edge = archive.recover(agent, "s1", rid, match="已提交\n=== 1 failed", around=5)
    assert edge.content == lines_of(whole, 34, 40)
    assert edge.appended.excerpt is not None and edge.appended.excerpt.last_line == 40


def test_an_excerpt_copy_comes_back_as_the_same_excerpt_and_spans_count_in_the_original(
    archive: Archive, agent: Principal
) -> None:
    rid = archived(archive, agent)
    copy = archive.recover(agent, "s1", rid, lines=(23, 23)).appended
    archive.archive_results(agent, "s1", [(copy.result_id, "the failure line")])

    again = archive.recover(agent, "s1", copy.result_id)
    assert again.appended.excerpt == copy.excerpt and again.appended.recovered_from == copy.result_id
    assert again.content.startswith(b"FAILED tests/test_io.py::test_23")

    archive.archive_results(agent, "s1", [(again.appended.result_id, "the failure line")])
    wider = archive.recover(agent, "s1", copy.result_id, lines=(1, 2))
    assert wider.content == lines_of(LOG.encode(), 1, 2)  # the original's lines 1-2, not the copy's


# ---- bad spans: a clear error, nothing appended ----------------------------------------------


@pytest.mark.parametrize(
    ("span", "field", "problem"),
    [
        ({"lines": (39, 41)}, "lines", "outside the original"),
        ({"lines": (0, 3)}, "lines", "outside the original"),
        ({"lines": (10, 9)}, "lines", "inverted"),
        ({"byte_range": (5, 5)}, "byte_range", "empty"),
        ({"byte_range": (9, 3)}, "byte_range", "inverted"),
        ({"byte_range": (0, 10**9)}, "byte_range", "outside the original"),
        ({"match": "no such line anywhere"}, "match", "does not hold"),
    ],
)
def test_a_span_the_original_cannot_satisfy_names_its_size_and_appends_nothing(
    archive: Archive, agent: Principal, span: dict[str, Any], field: str, problem: str
) -> None:
    rid = archived(archive, agent)
    before = snapshot(archive)
    with pytest.raises(InvalidSpan) as e:
        archive.recover(agent, "s1", rid, idempotency_key="k-1", **span)
    err = e.value
    assert (err.field, err.result_id, err.lines, err.size) == (field, rid, 40, len(LOG.encode()))
    assert problem in err.problem and f"{rid} has 40 lines ({len(LOG.encode())} bytes)" in str(err)
    assert err.to_dict()["code"] == "invalid_span"
    assert snapshot(archive) == before  # no copy, no audit event, no stored reply


@pytest.mark.parametrize(
    ("span", "field"),
    [
        ({"lines": (1, 2), "match": "x"}, "match"),
        ({"lines": (1, 2), "byte_range": (0, 1)}, "byte_range"),
        ({"lines": (1,)}, "lines"),
        ({"lines": (1, True)}, "lines"),
        ({"byte_range": ("0", 4)}, "byte_range"),
        ({"match": "   "}, "match"),
        ({"match": "x", "around": -1}, "around"),
        ({"match": "x", "around": 1_001}, "around"),
    ],
)
def test_a_malformed_span_is_refused_before_anything_is_read(
    archive: Archive, agent: Principal, span: dict[str, Any], field: str
) -> None:
    rid = archived(archive, agent)
    before = snapshot(archive)
    with pytest.raises(InvalidInput) as e:
        archive.recover(agent, "s1", rid, **span)
    assert e.value.field == field
    assert snapshot(archive) == before


def test_an_excerpt_is_hash_checked_against_the_whole_original(archive: Archive, agent: Principal) -> None:
    rid = archived(archive, agent)
    digest = hashlib.sha256(LOG.encode()).hexdigest()
    # Lines 1-2 are untouched; the change is far from them, and still refused.
    tamper(archive, agent.tenant_id, digest, LOG.replace("37 passed", "38 passed").encode())
    before = snapshot(archive)
    with pytest.raises(IntegrityFailure):
        archive.recover(agent, "s1", rid, lines=(1, 2))
    assert snapshot(archive) == before


def test_a_live_result_is_not_excerpted(archive: Archive, agent: Principal) -> None:
    r = archive.record(agent, "s1", "pytest", LOG, observed_at=T0)
    with pytest.raises(StateConflict):
        archive.recover(agent, "s1", r.result_id, lines=(1, 2))


def test_an_idempotency_key_stands_for_its_span(archive: Archive, agent: Principal) -> None:
    rid = archived(archive, agent)
    first = archive.recover(agent, "s1", rid, match="p99", idempotency_key="need-7")
    again = archive.recover(agent, "s1", rid, match="p99", idempotency_key="need-7")
    assert again.appended == first.appended and again.content == first.content
    with pytest.raises(IdempotencyMismatch):
        archive.recover(agent, "s1", rid, match="p99", around=0, idempotency_key="need-7")
    with pytest.raises(IdempotencyMismatch):
        archive.recover(agent, "s1", rid, idempotency_key="need-7")
    with archive.store.read() as conn:
        copies = conn.execute(
            select(t.tool_results).where(t.tool_results.c.recovered_from_no.is_not(None))
        ).all()
    assert len(copies) == 1


def test_a_reader_sees_the_excerpt_a_copy_shows_not_the_whole_original(
    archive: Archive, agent: Principal
) -> None:
    rid = archived(archive, agent)
    copy = archive.recover(agent, "s1", rid, lines=(23, 23)).appended
    reader = Principal("clinic-a", "agent-1", frozenset({Role.READER}), Sensitivity.CONFIDENTIAL)
    result, archived_at, content = archive.read_result(reader, "s1", copy.result_id)
    assert archived_at is None and result.excerpt == copy.excerpt
    assert content == lines_of(LOG.encode(), 23, 23)
    assert archive.read_result(reader, "s1", rid)[2] is None  # the archived original is not a reader's


# ---- the span arithmetic, on any text ---------------------------------------------------------

_text = st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12), max_size=8).map(
    "\n".join
)


@given(text=_text, data=st.data())
def test_any_line_span_is_those_lines_and_any_byte_span_those_bytes(text: str, data: st.DataObject) -> None:
    content = text.encode()
    total = line_count(content)
    assert total == len(re.findall(rb"[^\n]*\n|[^\n]+\Z", content))
    if total:
        first = data.draw(st.integers(1, total))
        last = data.draw(st.integers(first, total))
        ex = resolve_span(content, result_id="r1", textual=True, lines=(first, last))
        assert ex is not None and ex.of(content) == lines_of(content, first, last)
        assert (ex.first_line, ex.last_line) == (first, last)
    if content:
        start = data.draw(st.integers(0, len(content) - 1))
        end = data.draw(st.integers(start + 1, len(content)))
        try:
            ex = resolve_span(content, result_id="r1", textual=False, byte_range=(start, end))
        except InvalidSpan:
            pytest.fail("a binary original is cut at any byte")
        assert ex is not None and ex.of(content) == content[start:end]
        assert ex.first_line == content[:start].count(b"\n") + 1
        assert ex.last_line == content[: end - 1].count(b"\n") + 1


_pieces = st.lists(st.sampled_from(["", "a", "bc", "\n", "中", "x y", "\n\n", "B"]), max_size=15).map("".join)


@given(
    text=_pieces,
    first=st.integers(-2, 12),
    last=st.integers(-2, 12),
    around=st.integers(0, 3),
    needle=st.sampled_from(["a", "bc", "中", "x y", "c\nx", "b"]),
)
def test_a_span_is_whole_lines_holding_what_it_names_or_refused(
    text: str, first: int, last: int, around: int, needle: str
) -> None:
    content = text.encode()
    total = line_count(content)
    try:
        ex = resolve_span(content, result_id="r1", textual=True, lines=(first, last))
        assert 1 <= first <= last <= total and ex is not None
        assert ex.of(content) == lines_of(content, first, last)
    except InvalidSpan:
        assert not 1 <= first <= last <= total
    try:
        ex = resolve_span(content, result_id="r1", textual=True, match=needle, around=around)
    except InvalidSpan:
        assert needle.lower() not in text.lower()
        return
    assert ex is not None and 1 <= ex.first_line <= ex.last_line <= total
    got = ex.of(content)
    assert got == lines_of(content, ex.first_line, ex.last_line)  # whole lines, exactly
    assert needle.lower() in got.decode().lower()
