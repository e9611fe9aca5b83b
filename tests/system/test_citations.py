"""Citation checks against real evidence records, on SQLite and PostgreSQL.

What an eval script or an agent relies on: a citation is `ok` only when its record resolves
for the principal, the cited version held at the answer's time and still does, and the quote
is really in the original (whitespace aside, also in Chinese); everything else gets a verdict
that says why, another tenant's record looks exactly like a missing one, and precision is
ok / total.
"""

from __future__ import annotations

import json
import time
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemo_sea.archive import (
    Archive,
    ContentTooLarge,
    EvidenceInput,
    InvalidInput,
    Principal,
    Sensitivity,
    StoreUnavailable,
)
from mnemo_sea.system.citations import (
    Citation,
    MalformedCitationsFile,
    check_answers,
    check_citations,
    load_citations_jsonl,
    normalise_text,
    quote_in_text,
)

DELIVERY = "policy:delivery:2026-10"
DELIVERY_BODY = """# 配送政策（国内）

## 第四节 物流调查

超过约定配送期后可申请
物流调查。跨境订单适用跨境配送政策。
"""
LABEL = "drug:carprofen:label"
LABEL_BODY = (
    "Carprofen tablets (veterinary). Manufacturer: V\u00e9toquinol.\n"
    "Dose: 4.4 mg/kg   once daily,\n"
    "or 2.2 mg/kg twice daily.\n"
    "Do not combine   with\tother NSAIDs.\n"
)
PRICE = "price:sku-17"
APPROVAL = "approval:vet-7"
PROMO = "promo:autumn"
SECRET = "case:controlled-drug-log"
FOREIGN = "order:O-1042"


@dataclass(frozen=True)
class Seeded:
    """Instants between the writes, for citing "as of" a point in the records' history."""

    before_all: datetime
    between_prices: datetime  # price v1 current, v2 not yet written
    before_retraction: datetime
    after_all: datetime


def sleep_tick() -> None:
    time.sleep(0.002)  # distinct timestamps on either side of an instant we take


def seed(archive: Archive, agent: Principal, admin: Principal, other: Principal) -> Seeded:
    before_all = datetime.now(UTC)
    sleep_tick()
    archive.put_evidence(
        agent,
        EvidenceInput(
            evidence_id=DELIVERY,
            body=DELIVERY_BODY,
            source="delivery-policy",
            scope="domestic",
            locator="section-4",
            statement="超过约定配送期后可申请物流调查",
            media_type="text/markdown",
        ),
    )
    archive.put_evidence(
        agent,
        EvidenceInput(evidence_id=LABEL, body=LABEL_BODY, source="labels/carprofen.txt", locator="p. 1"),
    )
    archive.put_evidence(agent, EvidenceInput(evidence_id=PRICE, body="SKU-17 costs 10 EUR.", source="erp"))
    sleep_tick()
    between = datetime.now(UTC)
    sleep_tick()
    archive.put_evidence(agent, EvidenceInput(evidence_id=PRICE, body="SKU-17 costs 12 EUR.", source="erp"))
    archive.put_evidence(
        agent,
        EvidenceInput(
            evidence_id=APPROVAL, body="Dr. Lin approved the refill for Mochi.", source="approvals"
        ),
    )
    archive.put_evidence(
        agent,
        EvidenceInput(
            evidence_id=PROMO,
            body="Autumn promotion: free delivery on all orders.",
            source="marketing",
            valid_from=before_all - timedelta(days=60),
            valid_until=before_all - timedelta(days=1),
        ),
    )
    archive.put_evidence(
        admin,
        EvidenceInput(
            evidence_id=SECRET,
            body="Controlled drug log: 3 ampoules.",
            source="pharmacy",
            sensitivity=Sensitivity.RESTRICTED,
        ),
    )
    archive.put_evidence(
        other, EvidenceInput(evidence_id=FOREIGN, body="Order O-1042 shipped on 2026-10-02.", source="oms")
    )
    sleep_tick()
    before_retraction = datetime.now(UTC)
    sleep_tick()
    archive.retract(agent, APPROVAL, "the approval was entered for the wrong patient")
    sleep_tick()
    return Seeded(before_all, between, before_retraction, datetime.now(UTC))


@pytest.fixture
def seeded(archive: Archive, agent: Principal, admin: Principal, other_tenant: Principal) -> Seeded:
    return seed(archive, agent, admin, other_tenant)


def one(
    archive: Archive, principal: Principal, citation: Citation | dict[str, Any], at: datetime | None = None
) -> Any:
    report = check_citations(archive, principal, [citation], answered_at=at)
    assert report.total == 1
    return report.checks[0]


# ---- on both backends ---------------------------------------------------------------------------


def test_quotes_are_found_verbatim_modulo_whitespace_in_english_and_chinese(
    archive: Archive, agent: Principal, seeded: Seeded
) -> None:
    cases: list[tuple[Citation, str, bool]] = [
        (Citation(LABEL, "Do not combine with other NSAIDs."), "ok", True),  # other whitespace
        (Citation(LABEL, "Dose: 4.4 mg/kg once daily,\n  or 2.2 mg/kg"), "ok", True),  # across lines
        (Citation(LABEL, "Manufacturer: Ve\u0301toquinol"), "ok", True),  # NFD quote, NFC original
        (Citation(DELIVERY, "超过约定配送期后可申请物流调查"), "ok", True),  # line break inside the sentence
        (Citation(DELIVERY, "超过约定 配送期后可申请 物流调查。"), "ok", True),
        (Citation(DELIVERY, "跨境订单适用跨境配送政策"), "ok", True),
        (Citation(LABEL, "Do not combine with corticosteroids."), "quote_not_found", False),
        (Citation(LABEL, "4 mg/kg once daily"), "quote_not_found", False),  # inside "4.4 mg/kg"
        (Citation(LABEL, "bine with other"), "quote_not_found", False),  # starts inside a word
        (Citation(LABEL, "do not combine with other NSAIDs"), "quote_not_found", False),  # case differs
        (Citation(DELIVERY, "超过约定配送期后可申请物流退款"), "quote_not_found", False),
        (Citation(DELIVERY, "超过约定配送期后，可申请物流调查"), "quote_not_found", False),  # added comma
    ]
    report = check_citations(archive, agent, [c for c, _, _ in cases])
    for check, (citation, verdict, found) in zip(report.checks, cases, strict=True):
        assert (check.verdict, check.quote_found) == (verdict, found), citation.quote
        assert check.resolves
        assert check.version_checked == 1
        assert check.version_source == "in_force"
    assert report.precision == 6 / 12
    assert "does not appear" in report.checks[6].reason


def test_versions_superseded_and_retracted_before_or_since_the_answer(
    archive: Archive, agent: Principal, seeded: Seeded
) -> None:
    s = seeded
    # Cited with its version: held at the answer's time, replaced by version 2 since.
    c = one(archive, agent, Citation(PRICE, "costs 10 EUR", version=1), s.between_prices)
    assert (c.verdict, c.valid_at_answer, c.changed_since_answer, c.superseded_by) == (
        "superseded",
        True,
        True,
        2,
    )
    assert c.status == "superseded" and c.ended_at is not None and c.ended_at > s.between_prices
    # The same version cited by an answer given after version 2 existed: already stale then.
    c = one(archive, agent, Citation(PRICE, "costs 10 EUR", version=1), s.after_all)
    assert (c.verdict, c.valid_at_answer, c.changed_since_answer) == ("stale_version", False, False)
    assert "before the answer" in c.reason
    # Without a version, the version in force at the answer's time is checked.
    c = one(archive, agent, Citation(PRICE, "costs 10 EUR"), s.between_prices)
    assert (c.verdict, c.version_checked, c.version_source) == ("superseded", 1, "in_force")
    c = one(archive, agent, Citation(PRICE, "costs 12 EUR"), s.after_all)
    assert (c.verdict, c.version_checked) == ("ok", 2)
    c = one(archive, agent, Citation(PRICE, "costs 12 EUR"))  # answered now
    assert (c.verdict, c.version_checked) == ("ok", 2)
    c = one(archive, agent, Citation(PRICE, "costs 12 EUR"), s.between_prices)  # v1 said 10 then
    assert (c.verdict, c.version_checked) == ("quote_not_found", 1)
    c = one(archive, agent, Citation(PRICE, "costs 12 EUR", version=3), s.after_all)
    assert c.verdict == "unresolved"

    # Retracted after the answer was given ...
    c = one(archive, agent, Citation(APPROVAL, "Dr. Lin approved the refill"), s.before_retraction)
    assert (c.verdict, c.version_checked, c.version_source) == ("retracted", 1, "in_force")
    assert (c.valid_at_answer, c.changed_since_answer) == (True, True)
    assert "after the answer" in c.reason
    # ... and before it: no version was in force, the retracted one is what the answer saw.
    c = one(archive, agent, Citation(APPROVAL, "Dr. Lin approved the refill"), s.after_all)
    assert (c.verdict, c.version_checked, c.version_source) == ("retracted", 1, "fallback")
    assert (c.valid_at_answer, c.changed_since_answer) == (False, False)
    assert "before the answer" in c.reason


def test_validity_window_and_recording_time_bound_the_answer(
    archive: Archive, agent: Principal, seeded: Seeded
) -> None:
    quote = "free delivery on all orders"
    # valid_until lies before the answer: not valid then, whether the version is given or not.
    for citation in (Citation(PROMO, quote, version=1), Citation(PROMO, quote)):
        c = one(archive, agent, citation, seeded.after_all)
        assert (c.verdict, c.valid_at_answer, c.version_checked, c.quote_found) == (
            "invalid_at_time",
            False,
            1,
            True,
        )
        assert "outside" in c.reason
    # An answer given before the record existed cannot have cited it.
    c = one(archive, agent, Citation(LABEL, "Do not combine"), seeded.before_all - timedelta(days=365))
    assert (c.verdict, c.version_source) == ("invalid_at_time", "fallback")
    assert "after the answer" in c.reason
    # Of several versions all recorded later, the first is what such an answer could have meant.
    c = one(archive, agent, Citation(PRICE, "costs 10 EUR"), seeded.before_all - timedelta(days=1))
    assert (c.verdict, c.version_checked, c.version_source) == ("invalid_at_time", 1, "fallback")


def test_another_tenants_record_is_unresolved_exactly_like_a_missing_one(
    archive: Archive, agent: Principal, other_tenant: Principal, seeded: Seeded
) -> None:
    foreign = one(archive, agent, Citation(FOREIGN, "Order O-1042 shipped"))
    assert (foreign.verdict, foreign.resolves, foreign.quote_found) == ("unresolved", False, None)
    # The owner sees it; once it is deleted, the answer to the other tenant is word for word the same.
    assert one(archive, other_tenant, Citation(FOREIGN, "Order O-1042 shipped")).verdict == "ok"
    archive.delete_evidence(other_tenant, FOREIGN)
    missing = one(archive, agent, Citation(FOREIGN, "Order O-1042 shipped"))
    assert missing.to_dict() == foreign.to_dict()
    assert one(archive, other_tenant, Citation(FOREIGN, "Order O-1042 shipped")).verdict == "unresolved"


def test_clearance_locator_and_precision(
    archive: Archive, agent: Principal, admin: Principal, seeded: Seeded
) -> None:
    citations: list[Citation | dict[str, Any]] = [
        Citation(DELIVERY, "超过约定配送期后可申请物流调查", locator="section-4"),  # ok
        {"evidence_id": DELIVERY, "quote": "超过约定配送期后可申请物流调查", "locator": "  section-4 "},  # ok
        Citation(DELIVERY, "超过约定配送期后可申请物流调查", locator="section-5"),  # locator_mismatch
        Citation(SECRET, "Controlled drug log"),  # forbidden for the agent (clearance internal)
        Citation(PRICE, "costs 10 EUR", version=1),  # stale_version (answer given now)
        Citation("policy:refunds", "no such record"),  # unresolved
        {"evidence_id": LABEL, "quote": ""},  # invalid
        Citation(LABEL, "once daily", locator="p. 1"),  # ok
    ]
    report = check_citations(archive, agent, citations)
    verdicts = [c.verdict for c in report.checks]
    assert verdicts == [
        "ok",
        "ok",
        "locator_mismatch",
        "forbidden",
        "stale_version",
        "unresolved",
        "invalid",
        "ok",
    ]
    assert report.checks[2].locator_matches is False
    assert report.checks[2].record_locator == "section-4"
    assert report.checks[2].quote_found is True
    assert "clearance" in report.checks[3].reason
    assert (report.total, report.ok, report.precision) == (8, 3, 3 / 8)
    assert report.counts["ok"] == 3 and report.counts["superseded"] == 0
    assert sum(report.counts.values()) == 8
    out = json.loads(json.dumps(report.to_dict(), ensure_ascii=False))
    assert out["precision"] == 3 / 8
    assert [c["verdict"] for c in out["citations"]] == verdicts
    # The admin's clearance covers the restricted record.
    assert one(archive, admin, Citation(SECRET, "Controlled drug log")).verdict == "ok"


# ---- SQLite only: bad input, edge cases, JSONL ----------------------------------------------------


@pytest.fixture
def lite(tmp_path: Path, agent: Principal, admin: Principal, other_tenant: Principal) -> Any:
    a = Archive.open(f"sqlite+pysqlite:///{tmp_path / 'lite.db'}")
    seeded = seed(a, agent, admin, other_tenant)
    try:
        yield a, seeded
    finally:
        a.close()


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"evidence_id": DELIVERY, "quote": "   \n\t"}, "quote"),
        ({"evidence_id": DELIVERY}, "quote"),
        ({"quote": "x"}, "evidence_id"),
        ({"evidence_id": "", "quote": "x"}, "evidence_id"),
        ({"evidence_id": "has spaces in it", "quote": "x"}, "evidence_id"),
        ({"evidence_id": DELIVERY, "quote": 42}, "quote"),
        ({"evidence_id": DELIVERY, "quote": "x", "version": "2"}, "version"),
        ({"evidence_id": DELIVERY, "quote": "x", "version": 0}, "version"),
        ({"evidence_id": DELIVERY, "quote": "x", "version": True}, "version"),
        ({"evidence_id": DELIVERY, "quote": "x", "locator": 4}, "locator"),
        ({"evidence_id": DELIVERY, "qoute": "x"}, "citation"),
        ("policy:delivery:2026-10", "citation"),
        (None, "citation"),
    ],
)
def test_a_malformed_citation_gets_the_invalid_verdict_naming_the_field(
    lite: Any, agent: Principal, item: Any, field: str
) -> None:
    archive, _ = lite
    report = check_citations(archive, agent, [item, Citation(LABEL, "once daily")])
    bad, good = report.checks
    assert (bad.verdict, bad.citation, bad.resolves) == ("invalid", None, False)
    assert bad.reason.startswith(f"{field}:")
    assert good.verdict == "ok"
    assert report.precision == 0.5
    with pytest.raises(InvalidInput):  # the typed constructor refuses the same input
        Citation.parse(item)


@pytest.mark.parametrize("bad", [{"evidence_id": LABEL, "quote": "x"}, "a string", None, 3])
def test_citations_that_are_not_a_list_raise_invalid_input(lite: Any, agent: Principal, bad: Any) -> None:
    archive, _ = lite
    with pytest.raises(InvalidInput) as e:
        check_citations(archive, agent, bad)
    assert e.value.field == "citations"


def test_naive_answer_time_raises_and_no_citations_has_no_precision(lite: Any, agent: Principal) -> None:
    archive, _ = lite
    with pytest.raises(InvalidInput) as e:
        check_citations(archive, agent, [], answered_at=datetime(2026, 10, 20, 9, 0))
    assert e.value.field == "answered_at"
    report = check_citations(archive, agent, [], answered_at=datetime(2026, 10, 20, 9, 0, tzinfo=UTC))
    assert (report.total, report.precision) == (0, None)
    assert report.to_dict()["precision"] is None


def test_a_binary_original_never_matches_a_quote(lite: Any, agent: Principal) -> None:
    archive, _ = lite
    archive.put_evidence(
        agent,
        EvidenceInput(
            evidence_id="xray:mochi",
            body=b"\x89PNG\r\n\x1a\n\xff\xfe",
            source="imaging",
            media_type="image/png",
        ),
    )
    c = one(archive, agent, Citation("xray:mochi", "PNG"))
    assert (c.verdict, c.quote_found) == ("quote_not_found", False)
    assert "not text" in c.reason


def test_a_declared_charset_is_honoured(lite: Any, agent: Principal) -> None:
    archive, _ = lite
    body = "配送延误超过七天可申请调查".encode("gb18030")
    archive.put_evidence(
        agent,
        EvidenceInput(
            evidence_id="policy:legacy", body=body, source="legacy", media_type="text/plain; charset=gb18030"
        ),
    )
    assert one(archive, agent, Citation("policy:legacy", "超过七天可申请调查")).verdict == "ok"


def test_store_failures_propagate_instead_of_becoming_verdicts(
    lite: Any, agent: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive, _ = lite

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("database is locked")

    monkeypatch.setattr(archive, "get_evidence", unavailable)
    with pytest.raises(StoreUnavailable):
        check_citations(archive, agent, [Citation(LABEL, "once daily")])


def test_deleted_evidence_is_unresolved(lite: Any, agent: Principal, admin: Principal) -> None:
    archive, _ = lite
    assert one(archive, agent, Citation(LABEL, "once daily")).verdict == "ok"
    receipt = archive.delete_evidence(admin, LABEL)
    assert archive.verify_deleted(admin, receipt) == []
    assert one(archive, agent, Citation(LABEL, "once daily")).verdict == "unresolved"
    assert one(archive, agent, Citation(LABEL, "once daily", version=1)).verdict == "unresolved"


def write_lines(path: Path, lines: list[str], *, bom: bool = False, crlf: bool = False) -> Path:
    data = ("\r\n" if crlf else "\n").join(lines).encode("utf-8")
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)
    return path


def test_jsonl_answers_load_and_evaluate(lite: Any, agent: Principal, tmp_path: Path) -> None:
    archive, s = lite
    at = s.between_prices.isoformat()
    path = write_lines(
        tmp_path / "answers.jsonl",
        [
            json.dumps(
                {
                    "id": "a1",
                    "question": "能申请物流调查吗？",
                    "answer": "可以。",
                    "citations": [
                        {
                            "evidence_id": DELIVERY,
                            "quote": "超过约定配送期后可申请物流调查",
                            "locator": "section-4",
                        }
                    ],
                },
                ensure_ascii=False,
            ),
            "",
            json.dumps(
                {
                    "id": 2,
                    "answered_at": at,
                    "citations": [
                        {"evidence_id": PRICE, "version": 1, "quote": "costs 10 EUR"},
                        {"evidence_id": PRICE, "quote": "costs 99 EUR"},
                        {"evidence_id": PRICE, "qoute": "typo"},
                    ],
                }
            ),
            json.dumps({"answered_at": "2030-01-01T00:00:00Z", "citations": []}),
            "",
        ],
        bom=True,
        crlf=True,
    )
    answers = load_citations_jsonl(path)
    assert [(a.line, a.answer_id, len(a.citations)) for a in answers] == [
        (1, "a1", 1),
        (3, "2", 3),
        (4, None, 0),
    ]
    assert answers[1].answered_at == s.between_prices
    assert answers[2].answered_at == datetime(2030, 1, 1, tzinfo=UTC)

    result = check_answers(archive, agent, answers)
    assert [[c.verdict for c in r.checks] for r in result.reports] == [
        ["ok"],
        ["superseded", "quote_not_found", "invalid"],
        [],
    ]
    assert result.precision == 1 / 4
    out = json.loads(json.dumps(result.to_dict(), ensure_ascii=False))
    assert (out["answers"], out["total"], out["ok"]) == (3, 4, 1)
    assert [r["line"] for r in out["results"]] == [1, 3, 4]
    assert out["results"][1]["id"] == "2"


def test_malformed_jsonl_lines_are_reported_with_their_numbers(tmp_path: Path) -> None:
    good = json.dumps({"citations": [{"evidence_id": LABEL, "quote": "once daily"}]})
    path = tmp_path / "bad.jsonl"
    path.write_bytes(
        b"\n".join(
            [
                good.encode(),  # 1
                b"{not json",  # 2
                b"[1, 2]",  # 3
                b"",  # 4 (blank, skipped)
                b'{"answer": "no citations key"}',  # 5
                b'{"citations": "policy:delivery"}',  # 6
                b'{"answered_at": "2026-10-20T09:00:00", "citations": []}',  # 7 (naive)
                b'{"answered_at": "last tuesday", "citations": []}',  # 8
                b'{"id": [1], "citations": []}',  # 9
                b'{"citations": [], "x": "\xff\xfe"}',  # 10 (not UTF-8)
                good.encode(),  # 11
            ]
        )
    )
    with pytest.raises(MalformedCitationsFile) as e:
        load_citations_jsonl(path)
    err = e.value
    assert [p.line for p in err.problems] == [2, 3, 5, 6, 7, 8, 9, 10]
    problems = {p.line: p.problem for p in err.problems}
    assert problems[2].startswith("not JSON")
    assert "object" in problems[3]
    assert "'citations'" in problems[5]
    assert "must be a list" in problems[6]
    assert "time zone" in problems[7]
    assert "ISO-8601" in problems[8]
    assert "'id'" in problems[9]
    assert "UTF-8" in problems[10]
    assert "8 malformed line(s)" in err.message and "line 2: not JSON" in err.message
    assert [a.line for a in err.answers] == [1, 11]  # good lines, for callers that accept partial input
    assert isinstance(err, InvalidInput)
    assert err.to_dict()["lines"][0] == {"line": 2, "problem": problems[2]}


def test_jsonl_file_problems(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no such file"):
        load_citations_jsonl(tmp_path / "missing.jsonl")
    with pytest.raises(InvalidInput, match="not a regular file"):
        load_citations_jsonl(tmp_path)
    big = write_lines(tmp_path / "big.jsonl", [json.dumps({"citations": []})] * 10)
    with pytest.raises(ContentTooLarge):
        load_citations_jsonl(big, max_bytes=50)
    empty = write_lines(tmp_path / "empty.jsonl", ["", "  "])
    assert load_citations_jsonl(empty) == []


# ---- normalisation (no database) -----------------------------------------------------------------


def test_normalisation_keeps_chinese_intact_and_collapses_latin_whitespace() -> None:
    assert normalise_text("  Do not \t combine\n\nwith  ") == "Do not combine with"
    assert normalise_text("超过约定配送期\n后可申请\u3000物流调查") == "超过约定配送期后可申请物流调查"
    assert normalise_text("使用 Mnemo 系统") == "使用Mnemo系统"
    assert normalise_text("O-1042 的 物流") == "O-1042的物流"
    assert normalise_text("e\u0301") == "\u00e9"
    assert normalise_text("a\u200bb\u00a0c") == "a b c"
    assert normalise_text("한국어 문장") == "한국어 문장"  # Korean keeps its word spaces
    assert quote_in_text("约定配送期", "超过约定配送期后")  # Chinese has no word boundaries
    assert not quote_in_text("5 mg", "give 0.5 mg")
    assert not quote_in_text("2", "1,2 mg")
    assert quote_in_text("5 mg.", "give 5 mg. Then")
    assert not quote_in_text("   ", "anything")


_WORDS = st.sampled_from(
    ["Dose", "4.4", "mg/kg", "NSAIDs.", "超过", "配送期", "物流调查。", "Vétoquinol", "O-1042"]
)
_GAPS = st.sampled_from([" ", "  ", "\n", "\t", "\u3000", " \r\n ", "\u00a0"])


@given(
    words=st.lists(_WORDS, min_size=1, max_size=12),
    gaps=st.lists(_GAPS, min_size=12, max_size=12),
    other_gaps=st.lists(_GAPS, min_size=12, max_size=12),
    span=st.tuples(st.integers(0, 11), st.integers(1, 12)),
    decompose=st.booleans(),
)
def test_any_run_of_words_is_found_whatever_whitespace_separates_them(
    words: list[str], gaps: list[str], other_gaps: list[str], span: tuple[int, int], decompose: bool
) -> None:
    original = "".join(w + g for w, g in zip(words, gaps, strict=False))
    start = min(span[0], len(words) - 1)
    end = min(len(words), start + span[1])
    quote = "".join(w + g for w, g in zip(words[start:end], other_gaps, strict=False))
    if decompose:
        quote = unicodedata.normalize("NFD", quote)
    assert quote_in_text(quote, original)
