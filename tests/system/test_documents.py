"""Loading user files for ingest: what `mnemo-sea ingest` relies on.

Text and Markdown files become one document each with an id derived from their path (the same
on every load, so an edited file becomes a new version); JSONL lines become documents with
their own fields; directories are walked in sorted order. Every kind of bad input gets a typed
error that names the file (and for JSONL, every bad line with its number), and a partial load
keeps the good documents and lists the problems.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from mnemo_sea.archive import (
    Archive,
    ContentTooLarge,
    InvalidInput,
    Principal,
    Role,
    Sensitivity,
)
from mnemo_sea.archive.rules.refs import check_evidence_id
from mnemo_sea.system.documents import (
    BinaryFile,
    FileTooLarge,
    LoadedDocuments,
    MalformedDocuments,
    MissingPath,
    UnsupportedFile,
    document_id,
    load_documents,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[Archive]:
    a = Archive.open(f"sqlite+pysqlite:///{tmp_path / 'ingest.db'}")
    try:
        yield a
    finally:
        a.close()


@pytest.fixture
def agent() -> Principal:
    return Principal("clinic", "ingest", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)


def jsonl(*rows: Any) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows)


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


# ---- text and Markdown ------------------------------------------------------------------------------


def test_a_markdown_file_is_one_document_with_a_path_derived_id(tmp_path: Path) -> None:
    body = "# 探视规定\n\n住院探视：每日 15:00–16:00。\r\n"
    write(tmp_path / "visiting.md", "\ufeff" + body)

    loaded = load_documents(tmp_path / "visiting.md", scope="policy")

    assert len(loaded) == 1
    (doc,) = loaded.documents
    assert doc.item.body == body  # verbatim, CRLF kept, only the byte-order mark dropped
    assert doc.item.evidence_id == "doc:visiting.md"
    assert doc.item.locator == "visiting.md"
    assert doc.item.source == "visiting.md"
    assert doc.item.scope == "policy"
    assert doc.item.media_type == "text/markdown; charset=utf-8"
    assert doc.item.provenance == "document"
    assert loaded.files == ("visiting.md",)


def test_a_text_file_takes_the_given_source_and_id(tmp_path: Path) -> None:
    write(tmp_path / "note.txt", "plain text note")
    loaded = load_documents(tmp_path / "note.txt", source="front-desk", evidence_id="note:front-desk:1")
    (item,) = loaded.items
    assert (item.evidence_id, item.source, item.media_type) == (
        "note:front-desk:1",
        "front-desk",
        "text/plain; charset=utf-8",
    )


def test_a_directory_is_walked_recursively_in_sorted_order(tmp_path: Path) -> None:
    write(tmp_path / "b.md", "B")
    write(tmp_path / "a" / "z.txt", "Z")
    write(tmp_path / "a" / "docs.jsonl", jsonl({"evidence_id": "x:1", "body": "one"}))
    write(tmp_path / "a" / "image.png", b"\x89PNG\r\n\x1a\n\x00")
    write(tmp_path / ".git" / "config.txt", "hidden")
    write(tmp_path / ".hidden.md", "hidden")
    write(tmp_path / "c.MD", "upper-case extension")

    loaded = load_documents(tmp_path)

    assert loaded.files == ("a/docs.jsonl", "a/z.txt", "b.md", "c.MD")
    assert [d.item.evidence_id for d in loaded.documents] == ["x:1", "doc:a/z.txt", "doc:b.md", "doc:c.MD"]
    assert loaded.skipped == ("a/image.png",)
    assert loaded.problems == ()
    # Loading the same tree again gives the same ids: re-ingest makes versions, not duplicates.
    assert [d.item.evidence_id for d in load_documents(tmp_path).documents] == [
        d.item.evidence_id for d in loaded.documents
    ]


def test_ids_from_paths_an_id_cannot_hold_are_valid_and_distinct() -> None:
    ids = {document_id(p) for p in ("药品/阿莫西林 说明书.md", "药品/美洛昔康 说明书.md", "a b.md", "a@b.md")}
    assert len(ids) == 4
    for evidence_id in ids:
        assert check_evidence_id(evidence_id) == evidence_id
    assert document_id("a b.md") == document_id("a b.md")  # deterministic
    long = document_id("x/" * 200 + "end.md")
    assert check_evidence_id(long) == long


def test_an_empty_document_is_reported(tmp_path: Path) -> None:
    write(tmp_path / "empty.md", "  \n\n")
    with pytest.raises(MalformedDocuments) as err:
        load_documents(tmp_path)
    assert [(p.line, p.code) for p in err.value.problems] == [(None, "empty")]
    assert "empty.md" in err.value.message


# ---- JSONL ------------------------------------------------------------------------------------------


def test_jsonl_lines_carry_their_own_fields(tmp_path: Path) -> None:
    row = {
        "evidence_id": "drug:amoxicillin:label:2026-03",
        "source": "clinic-formulary",
        "scope": "drug_label",
        "locator": "说明书 第2页",
        "statement": "犬、猫按体重每公斤 10–20 mg 口服，每日 2 次。",
        "body": "【用法用量】口服。犬、猫：按体重每公斤 10–20 mg，每日 2 次。",
        "valid_from": "2026-03-01T00:00:00+08:00",
        "valid_until": "2027-03-01T00:00:00Z",
        "observed_at": "2026-02-20T12:00:00+08:00",
        "sensitivity": "confidential",
        "provenance": "document",
    }
    write(tmp_path / "labels.jsonl", jsonl(row, "", {"body": "no id given"}))

    loaded = load_documents(tmp_path / "labels.jsonl", source="fallback-source", scope="fallback-scope")

    first, second = loaded.documents
    assert first.line == 1 and second.line == 3
    item = first.item
    assert (item.evidence_id, item.source, item.scope, item.locator, item.statement, item.body) == (
        row["evidence_id"],
        row["source"],
        row["scope"],
        row["locator"],
        row["statement"],
        row["body"],
    )
    assert item.valid_from == datetime(2026, 3, 1, tzinfo=timezone(timedelta(hours=8)))
    assert item.valid_until == datetime(2027, 3, 1, tzinfo=UTC)
    assert item.observed_at == datetime(2026, 2, 20, 4, tzinfo=UTC)
    assert item.sensitivity == Sensitivity.CONFIDENTIAL
    # A line without its own fields takes the load's defaults and a stable id from file and line.
    other = second.item
    assert (other.evidence_id, other.source, other.scope, other.locator) == (
        "doc:labels.jsonl#3",
        "fallback-source",
        "fallback-scope",
        "labels.jsonl",
    )


def test_repeated_ids_become_versions_in_file_order(
    tmp_path: Path, archive: Archive, agent: Principal
) -> None:
    write(
        tmp_path / "policy.jsonl",
        jsonl(
            {"evidence_id": "policy:analgesia:cats", "body": "v1: 口服美洛昔康最多 4 日", "source": "manual"},
            {"evidence_id": "policy:other", "body": "unrelated", "source": "manual"},
            {"evidence_id": "policy:analgesia:cats", "body": "v2: 不再口服美洛昔康", "source": "manual"},
        ),
    )
    write(tmp_path / "readme.md", "# Clinic manual\n")

    for item in load_documents(tmp_path).items:
        archive.put_evidence(agent, item)

    history = archive.evidence_history(agent, "policy:analgesia:cats")
    assert [(r.version, r.status) for r in history] == [(1, "superseded"), (2, "active")]
    _, content = archive.get_evidence(agent, "policy:analgesia:cats", with_content=True)
    assert content == "v2: 不再口服美洛昔康".encode()
    rec, content = archive.get_evidence(agent, "doc:readme.md", with_content=True)
    assert content == b"# Clinic manual\n"
    assert (rec.locator, rec.media_type) == ("readme.md", "text/markdown; charset=utf-8")


BAD_LINES = [
    ('{"body": "ok", "evidence_id": "good:1"}', None),
    ("{not json", "not JSON"),
    ('{"evidence_id": "x:2", "source": "s"}', "'body' is required"),
    ('{"body": 42}', "'body' must be a string, got int"),
    ('{"body": "x", "valid_from": "2026-10-01T00:00:00"}', "has no time zone"),
    ('{"body": "x", "valid_until": "next tuesday"}', "is not an ISO-8601 date-time"),
    ('{"body": "x", "valid_untill": "2026-10-01T00:00:00Z"}', "unknown field(s) 'valid_untill'"),
    ('["a", "list"]', "must be a JSON object, got list"),
    ('{"body": "x", "sensitivity": "top-secret"}', "'sensitivity'"),
    ('{"body": "x", "evidence_id": "has space"}', "'evidence_id'"),
    ('{"body": "x", "provenance": "rumour"}', "'provenance' 'rumour' is not one of"),
    (
        '{"body": "x", "valid_from": "2026-10-01T00:00:00Z", "valid_until": "2026-09-01T00:00:00Z"}',
        "'valid_until' must be later than 'valid_from'",
    ),
    ('{"body": "   "}', "'body' must not be empty"),
    ('{"body": "x", "scope": ["a"]}', "'scope' must be a string, got list"),
    ('{"body": "second good", "evidence_id": "good:2"}', None),
]


def bad_file(tmp_path: Path) -> Path:
    return write(tmp_path / "docs.jsonl", "".join(line + "\n" for line, _ in BAD_LINES))


def test_every_malformed_line_is_reported_at_once_with_its_number(tmp_path: Path) -> None:
    path = bad_file(tmp_path)
    with pytest.raises(MalformedDocuments) as err:
        load_documents(path)

    expected = {n: problem for n, (_, problem) in enumerate(BAD_LINES, start=1) if problem}
    got = {p.line: p.problem for p in err.value.problems}
    assert set(got) == set(expected)
    for line, problem in expected.items():
        assert problem in got[line], f"line {line}: {got[line]!r}"
    assert all(p.path == str(path) for p in err.value.problems)
    assert isinstance(err.value, InvalidInput)
    assert "line 2: not JSON" in err.value.message and "line 14" in err.value.message
    assert err.value.to_dict()["problems"][0]["line"] == 2
    # The good lines are attached for a caller that decides to keep them.
    assert [d.item.evidence_id for d in err.value.documents] == ["good:1", "good:2"]


def test_a_line_with_several_problems_names_them_all(tmp_path: Path) -> None:
    path = write(tmp_path / "x.jsonl", '{"source": 7, "valid_from": "yesterday"}\n')
    with pytest.raises(MalformedDocuments) as err:
        load_documents(path)
    (problem,) = err.value.problems
    assert "'body' is required" in problem.problem
    assert "'source' must be a string" in problem.problem
    assert "'valid_from' 'yesterday' is not an ISO-8601 date-time" in problem.problem


def test_partial_load_keeps_good_lines_and_lists_the_problems(tmp_path: Path) -> None:
    path = bad_file(tmp_path)
    loaded = load_documents(path, partial=True)
    assert isinstance(loaded, LoadedDocuments)
    assert [d.item.evidence_id for d in loaded.documents] == ["good:1", "good:2"]
    assert [p.line for p in loaded.problems] == [n for n, (_, bad) in enumerate(BAD_LINES, 1) if bad]


def test_a_label_the_index_would_refuse_is_a_line_problem_not_a_failed_batch(tmp_path: Path) -> None:
    """A source or scope is one of the index's labels: a control character in one is reported
    with its line (and skipped under partial) instead of refusing a batch at the store."""
    path = write(
        tmp_path / "x.jsonl",
        '{"body": "fine", "evidence_id": "ok"}\n'
        '{"body": "tab", "evidence_id": "t", "source": "kb\\tx"}\n'
        '{"body": "break", "evidence_id": "b", "scope": "a\\nb"}\n',
    )
    with pytest.raises(MalformedDocuments) as err:
        load_documents(path)
    assert [(p.line, p.problem.split(" holds")[0]) for p in err.value.problems] == [
        (2, "'source'"),
        (3, "'scope'"),
    ]
    assert "control character ('\\t') at position 2" in err.value.problems[0].problem
    loaded = load_documents(path, partial=True)
    assert [d.item.evidence_id for d in loaded.documents] == ["ok"]


def test_a_path_that_cannot_be_a_source_is_a_file_problem_unless_a_source_is_given(tmp_path: Path) -> None:
    write(tmp_path / "docs" / "fine.md", "fine")
    write(tmp_path / "docs" / "tab\there.md", "tabbed")
    with pytest.raises(MalformedDocuments) as err:
        load_documents(tmp_path / "docs")
    (problem,) = err.value.problems
    assert problem.path.endswith("tab\there.md") and "give --source" in problem.problem
    loaded = load_documents(tmp_path / "docs", source="kb")
    assert sorted(d.item.locator for d in loaded.documents) == ["fine.md", "tab\there.md"]
    with pytest.raises(InvalidInput) as refused:
        load_documents(tmp_path / "docs", source="kb\tx")
    assert refused.value.field == "source"


def test_a_line_that_is_not_utf8_is_a_line_problem(tmp_path: Path) -> None:
    path = write(tmp_path / "x.jsonl", b'{"body": "ok"}\n{"body": "caf\xe9"}\n')
    loaded = load_documents(path, partial=True)
    assert len(loaded) == 1
    assert [(p.line, p.problem) for p in loaded.problems] == [(2, "not UTF-8 (invalid byte at column 14)")]


# ---- unusable files ---------------------------------------------------------------------------------


def test_a_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "docs.jsonl"
    with pytest.raises(MissingPath) as err:
        load_documents(missing, partial=True)
    assert str(missing) in err.value.message
    assert "no such file or directory" in err.value.message
    assert isinstance(err.value, InvalidInput)


def test_an_unsupported_single_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "scan.pdf", b"%PDF-1.7")
    with pytest.raises(UnsupportedFile) as err:
        load_documents(path)
    assert "scan.pdf" in err.value.message and ".jsonl, .md, .txt" in err.value.message


def test_an_oversize_file_is_content_too_large_naming_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "big.md", "x" * 1001)
    with pytest.raises(ContentTooLarge) as err:
        load_documents(path, max_file_bytes=1000)
    assert isinstance(err.value, FileTooLarge)
    assert str(path) in err.value.message
    assert (err.value.size, err.value.limit) == (1001, 1000)
    # At the limit it loads.
    write(tmp_path / "ok.md", "x" * 1000)
    assert len(load_documents(tmp_path / "ok.md", max_file_bytes=1000)) == 1


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("photo.txt", b"GIF89a\x00\x01\x02", "NUL byte at offset 6"),
        ("notes.md", "caf\u00e9".encode("latin-1"), "not UTF-8 text"),
        ("docs.jsonl", b'{"body": "x"}\n\x00\x00\x00\n', "NUL byte at offset 14"),
    ],
)
def test_a_binary_file_is_a_typed_error_naming_the_file(
    tmp_path: Path, name: str, content: bytes, problem: str
) -> None:
    path = write(tmp_path / name, content)
    with pytest.raises(BinaryFile) as err:
        load_documents(path)
    assert str(path) in err.value.message
    assert problem in err.value.message


def test_in_a_directory_every_unusable_file_is_reported_at_once_unless_partial(tmp_path: Path) -> None:
    write(tmp_path / "a.md", "fine")
    write(tmp_path / "b.txt", b"\x00\x01binary")
    write(tmp_path / "c.md", "x" * 50)
    write(tmp_path / "d.jsonl", jsonl({"body": "fine too"}, "{broken"))
    write(tmp_path / "e.txt", b"\xff\xfe not utf-8")

    # Not the first bad file: every one of them, with the bad line, in one error.
    with pytest.raises(MalformedDocuments) as err:
        load_documents(tmp_path, max_file_bytes=40)
    assert [(Path(p.path).name, p.line, p.code) for p in err.value.problems] == [
        ("b.txt", None, "binary_file"),
        ("c.md", None, "content_too_large"),
        ("d.jsonl", 2, "malformed"),
        ("e.txt", None, "binary_file"),
    ]
    assert all(name in err.value.message for name in ("b.txt", "c.md", "d.jsonl line 2", "e.txt"))
    (tmp_path / "e.txt").unlink()

    loaded = load_documents(tmp_path, max_file_bytes=40, partial=True)
    assert [d.item.evidence_id for d in loaded.documents] == ["doc:a.md", "doc:d.jsonl#1"]
    assert [(Path(p.path).name, p.line, p.code) for p in loaded.problems] == [
        ("b.txt", None, "binary_file"),
        ("c.md", None, "content_too_large"),
        ("d.jsonl", 2, "malformed"),
    ]
    assert "50 bytes exceeds the limit of 40 bytes" in loaded.problems[1].problem


def test_bad_options_are_invalid_input(tmp_path: Path) -> None:
    write(tmp_path / "a.md", "x")
    with pytest.raises(InvalidInput, match="scope"):
        load_documents(tmp_path, scope="  ")
    with pytest.raises(InvalidInput, match="max_file_bytes"):
        load_documents(tmp_path, max_file_bytes=0)
    with pytest.raises(InvalidInput, match="evidence_id"):
        load_documents(tmp_path, evidence_id="one:id")  # a directory holds many documents
    with pytest.raises(InvalidInput, match="evidence_id"):
        load_documents(tmp_path / "a.md", evidence_id="bad id")


# ---- layering ---------------------------------------------------------------------------------------


def test_documents_does_not_import_the_retrieval_layer() -> None:
    tree = ast.parse((REPO / "mnemo_sea" / "system" / "documents.py").read_text(encoding="utf-8"))
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any("retrieval" in n for n in names), names
    code = (
        "import sys, mnemo_sea.system.documents, mnemo_sea.demo.samples as s; "
        "s.load_sample_tenant('clinic'); "
        "s.load_session_script(); s.load_sample_citations('clinic'); "
        "loaded = sorted(m for m in sys.modules if m.startswith('mnemo_sea.retrieval')); "
        "print(loaded); sys.exit(1 if loaded else 0)"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stdout + run.stderr
