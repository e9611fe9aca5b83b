"""One error table: every typed error of every layer has a category, and every surface answers by it.

The classes are collected by walking `__subclasses__()` after importing every module, so a new
error class fails here until it has an instance in FACTORIES and the answer it should get in
EXPECTED; and a surface that maps an error on its own (not through mnemo_sea.system.outcomes)
fails the per-surface comparisons below.
"""

from __future__ import annotations

import gc
import importlib
import os
import pkgutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import mnemo_sea
from mnemo_sea.archive import (
    ArchiveConflict,
    ArchiveError,
    BatchRejected,
    ContentTooLarge,
    Forbidden,
    IdempotencyMismatch,
    IntegrityFailure,
    InvalidBatch,
    InvalidInput,
    InvalidSpan,
    MemoryConflict,
    NotFound,
    ReceiptInvalid,
    ReceiptKeyMissing,
    RetractedContent,
    StateConflict,
    StoreCorrupt,
    StoreUnavailable,
    TargetStatus,
    TaskStateRejected,
    Unauthenticated,
)
from mnemo_sea.archive.features.api_keys import Unauthenticated as UnauthenticatedOfApiKeys
from mnemo_sea.archive.rules.errors import OutboxOwned
from mnemo_sea.cli.output import as_cli_error, exit_code_of
from mnemo_sea.client import ApiUnreachable, BadAnswer, InconsistentAnswer, MalformedAnswer
from mnemo_sea.client.errors import error_of
from mnemo_sea.client.wire import Reply, Request
from mnemo_sea.console.curation_report import ReportUnreadable
from mnemo_sea.context.errors import ContextOverBudget
from mnemo_sea.errors import MnemoError
from mnemo_sea.eval.curation.runner import ReplayError
from mnemo_sea.eval.curation.trace_format import TraceError
from mnemo_sea.extras import ExtraMissing
from mnemo_sea.mcp.results import from_exception
from mnemo_sea.rest import problems
from mnemo_sea.retrieval import (
    IndexConfigMismatch,
    IndexLocked,
    IndexUnavailable,
    InvalidDocument,
    InvalidQuery,
    ModelExportError,
    RetrievalError,
)
from mnemo_sea.system import outcomes
from mnemo_sea.system.citations import LineProblem, MalformedCitationsFile
from mnemo_sea.system.documents import (
    BinaryFile,
    DocumentError,
    DocumentProblem,
    FileTooLarge,
    MalformedDocuments,
    MissingPath,
    UnreadableFile,
    UnsupportedFile,
)
from mnemo_sea.system.errors import CacheUnavailable, JsonTooDeep, TooManyRequests

ROOT = Path(__file__).resolve().parents[2]


def _import_everything() -> None:
    for module in pkgutil.walk_packages(mnemo_sea.__path__, "mnemo_sea."):
        if ".migrations" in module.name:  # alembic's env scripts run only under alembic
            continue
        importlib.import_module(module.name)


def _subclasses(cls: type[BaseException]) -> Iterator[type[BaseException]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


_import_everything()
ERRORS = sorted(set(_subclasses(MnemoError)), key=lambda c: f"{c.__module__}.{c.__qualname__}")

FACTORIES: dict[type[BaseException], Callable[[], BaseException]] = {
    ArchiveError: lambda: ArchiveError("something the archive refused"),
    InvalidInput: lambda: InvalidInput("field", "is bad"),
    InvalidBatch: lambda: InvalidBatch([{"index": 0, "field": "body", "problem": "empty"}]),
    InvalidSpan: lambda: InvalidSpan("lines", "40-50 is outside the original", "r3", 12, 1234),
    TaskStateRejected: lambda: TaskStateRejected([{"field": "goal", "problem": "empty"}]),
    ContentTooLarge: lambda: ContentTooLarge("content", 10, 5),
    NotFound: lambda: NotFound("result", "r1"),
    Forbidden: lambda: Forbidden("agents may not"),
    Unauthenticated: lambda: Unauthenticated("unknown or revoked API key"),
    StateConflict: lambda: StateConflict("already archived"),
    MemoryConflict: lambda: MemoryConflict("user-1", "diet", "agent_inferred", 2, "user_stated"),
    IdempotencyMismatch: lambda: IdempotencyMismatch("key-1"),
    BatchRejected: lambda: BatchRejected([TargetStatus("r1", "unknown", "no such result")], "fix it"),
    ArchiveConflict: lambda: ArchiveConflict([TargetStatus("r1", "already_archived", "done")], "reload"),
    StoreUnavailable: lambda: StoreUnavailable("archive store unreachable: connection refused"),
    ExtraMissing: lambda: ExtraMissing(
        "`mnemo-sea serve` needs the 'server' extra", extra="server", module="uvicorn"
    ),
    CacheUnavailable: lambda: CacheUnavailable("redis unreachable"),
    JsonTooDeep: lambda: JsonTooDeep("tools.json", 100),
    TooManyRequests: lambda: TooManyRequests(retry_after=3, running=2, waiting=64),
    OutboxOwned: lambda: OutboxOwned("another process already applies this database's outbox"),
    ApiUnreachable: lambda: ApiUnreachable(
        "http://127.0.0.1:8000", "ConnectError", sent=False, request_id="r1"
    ),
    BadAnswer: lambda: BadAnswer("search", "", "refused"),
    MalformedAnswer: lambda: MalformedAnswer("search", "hits[0].span", "missing"),
    InconsistentAnswer: lambda: InconsistentAnswer("search", "status", "a 200 says 'forbidden'"),
    IntegrityFailure: lambda: IntegrityFailure("blob fails its hash"),
    StoreCorrupt: lambda: StoreCorrupt("/data/archive.db", "database disk image is malformed"),
    ReceiptInvalid: lambda: ReceiptInvalid("signature", "edited after signing"),
    ReceiptKeyMissing: lambda: ReceiptKeyMissing("/data/receipt.key"),
    RetractedContent: lambda: RetractedContent([TargetStatus("kb:1", "retracted", "version 1")], "change it"),
    ContextOverBudget: lambda: ContextOverBudget(
        budget_tokens=10, output_reserve=2, pinned_tokens=20, pinned={"instructions": 20}
    ),
    MalformedCitationsFile: lambda: MalformedCitationsFile("a.jsonl", [LineProblem(2, "not JSON")], []),
    DocumentError: lambda: DocumentError("notes", "cannot be used"),
    MissingPath: lambda: MissingPath("notes"),
    UnsupportedFile: lambda: UnsupportedFile("notes.pdf"),
    UnreadableFile: lambda: UnreadableFile("notes.md", "permission denied"),
    BinaryFile: lambda: BinaryFile("notes.md", "holds NUL bytes"),
    FileTooLarge: lambda: FileTooLarge("notes.md", 10, 5),
    MalformedDocuments: lambda: MalformedDocuments([DocumentProblem("d.jsonl", 2, "not JSON")], []),
    TraceError: lambda: TraceError("t.jsonl", "events", "empty"),
    ReplayError: lambda: ReplayError("trace-1", 0, "task_state", "refused"),
    RetrievalError: lambda: RetrievalError("something the index refused"),
    InvalidQuery: lambda: InvalidQuery("text", "empty"),
    InvalidDocument: lambda: InvalidDocument("body", "empty", evidence_id="e1"),
    IndexLocked: lambda: IndexLocked("/data/index", None),
    IndexUnavailable: lambda: IndexUnavailable("qdrant", "connection refused"),
    IndexConfigMismatch: lambda: IndexConfigMismatch("/data/index", "model_id", "hashing", "minilm"),
    ModelExportError: lambda: ModelExportError("the export's vectors differ from torch's"),
    ReportUnreadable: lambda: ReportUnreadable("report.json", "it is not JSON"),
}

C = outcomes.Category
# What each error must be answered with, written out (not read from the table): the REST
# statuses as they were before the table, and the CLI exit codes of mnemo_sea.cli.output.
INVALID, TOO_LARGE = (C.INVALID_INPUT, 422, 2), (C.TOO_LARGE, 413, 2)
CONFLICT, UNAVAILABLE, INTEGRITY = (C.CONFLICT, 409, 5), (C.UNAVAILABLE, 503, 6), (C.INTEGRITY, 500, 7)
EXPECTED: dict[type[BaseException], tuple[outcomes.Category, int, int]] = {
    ArchiveError: (C.INTERNAL, 500, 1),
    InvalidInput: INVALID,
    InvalidBatch: INVALID,
    InvalidSpan: INVALID,
    TaskStateRejected: INVALID,
    ContentTooLarge: TOO_LARGE,
    NotFound: (C.NOT_FOUND, 404, 3),
    Forbidden: (C.FORBIDDEN, 403, 4),
    Unauthenticated: (C.UNAUTHENTICATED, 401, 2),
    StateConflict: CONFLICT,
    MemoryConflict: CONFLICT,
    IdempotencyMismatch: CONFLICT,
    BatchRejected: INVALID,
    ArchiveConflict: CONFLICT,  # also a BatchRejected: the conflict wins
    StoreUnavailable: UNAVAILABLE,
    CacheUnavailable: UNAVAILABLE,
    JsonTooDeep: INVALID,
    TooManyRequests: (C.BUSY, 429, 6),  # also a StoreUnavailable: the tenant's share wins
    OutboxOwned: UNAVAILABLE,
    ApiUnreachable: UNAVAILABLE,  # the REST client's: the API it talks to is its store
    # The REST client's too: an answer it refuses is not what the API stands for.
    BadAnswer: INTEGRITY,
    MalformedAnswer: INTEGRITY,
    InconsistentAnswer: INTEGRITY,
    IntegrityFailure: INTEGRITY,
    StoreCorrupt: INTEGRITY,
    ReceiptInvalid: INVALID,  # an IntegrityFailure, but the client's document: invalid input wins
    ReceiptKeyMissing: INTEGRITY,  # a part of the deployment is gone: restored from a backup
    RetractedContent: CONFLICT,  # also a BatchRejected: the record's state (retracted) wins
    ContextOverBudget: INVALID,
    MalformedCitationsFile: INVALID,
    DocumentError: INVALID,
    MissingPath: INVALID,
    UnsupportedFile: INVALID,
    UnreadableFile: INVALID,
    BinaryFile: INVALID,
    FileTooLarge: TOO_LARGE,
    MalformedDocuments: INVALID,
    TraceError: INVALID,
    ReplayError: INVALID,
    RetrievalError: UNAVAILABLE,
    InvalidQuery: INVALID,
    InvalidDocument: INVALID,
    IndexLocked: UNAVAILABLE,
    IndexUnavailable: UNAVAILABLE,
    IndexConfigMismatch: (C.MISCONFIGURED, 500, 2),
    ModelExportError: (C.MISCONFIGURED, 500, 2),
    ExtraMissing: (C.MISCONFIGURED, 500, 2),  # the install lacks a part: as a misconfiguration
    ReportUnreadable: (C.MISCONFIGURED, 500, 2),  # the console's report file: the operator's setting
}


def _name(cls: type[BaseException]) -> str:
    return cls.__qualname__


def test_every_error_class_has_a_factory_and_an_expected_answer() -> None:
    assert len(ERRORS) > 30  # the walk found the layers' errors, not only the two bases
    assert sorted(map(_name, ERRORS)) == sorted(map(_name, FACTORIES))
    assert set(ERRORS) == set(FACTORIES) == set(EXPECTED)
    for cls, make in FACTORIES.items():
        assert type(make()) is cls


def _parents_categories(cls: type[BaseException]) -> set[outcomes.Category]:
    return {base.category for base in cls.__bases__ if issubclass(base, MnemoError)}


def test_every_class_states_its_category_or_has_its_parents() -> None:
    """An error's category is its class's, by the MRO, with no table of class names to miss a
    class or put one below another; where the parents' categories differ (the classes whose
    order the table kept by hand) the class states its own, and one that does not is refused."""
    assert {ArchiveError, RetrievalError} <= set(ERRORS)
    for cls in ERRORS:
        assert outcomes.category_of(FACTORIES[cls]()) is cls.category, _name(cls)
        assert "category" in vars(cls) or len(_parents_categories(cls)) == 1, _name(cls)
    mixed = {cls for cls in ERRORS if len(_parents_categories(cls)) > 1}
    assert mixed == {ArchiveConflict, RetractedContent, FileTooLarge}
    with pytest.raises(TypeError, match="state its own `category`"):
        type("Undecided", (BatchRejected, StateConflict), {})
    gc.collect()  # the refused class, made before the refusal, must not stay among the loaded ones
    assert "Undecided" not in {c.__name__ for c in BatchRejected.__subclasses__()}


def test_unauthenticated_is_a_typed_error_at_its_old_import_path_too() -> None:
    assert UnauthenticatedOfApiKeys is Unauthenticated
    err = Unauthenticated("no key")
    assert isinstance(err, ArchiveError) and err.reason == "no key" and err.code == "unauthenticated"


@pytest.mark.parametrize("cls", ERRORS, ids=_name)
def test_the_table_gives_each_error_its_answer(cls: type[BaseException]) -> None:
    exc: Any = FACTORIES[cls]()
    category, http_status, exit_code = EXPECTED[cls]
    assert outcomes.category_of(exc) is category  # its class's, not the fallthrough
    assert outcomes.outcome_of(exc) == outcomes.Outcome(category, http_status, exit_code, exc.code)


@pytest.mark.parametrize("cls", ERRORS, ids=_name)
def test_mcp_and_the_cli_answer_by_the_table(cls: type[BaseException]) -> None:
    exc: Any = FACTORIES[cls]()
    outcome = outcomes.outcome_of(exc)
    assert problems.status_of(exc) == outcome.http_status

    result = from_exception(exc, "some_tool")
    assert result.is_error
    payload = result.structured_content
    assert payload is not None
    assert payload["error"] == exc.code and payload["category"] == outcome.category.value
    assert payload["message"] == exc.message

    assert exit_code_of(exc) == outcome.exit_code
    reported = as_cli_error(exc)
    assert (reported.exit_code, reported.code) == (outcome.exit_code, exc.code)


def _raising_app() -> TestClient:
    app = FastAPI()
    problems.install(app)

    @app.get("/raise/{name}")
    def raise_it(name: str) -> None:
        raise next(make for cls, make in FACTORIES.items() if _name(cls) == name)()

    return TestClient(app, raise_server_exceptions=False)


def test_rest_answers_every_error_by_the_table() -> None:
    client = _raising_app()
    for cls in ERRORS:
        exc: Any = FACTORIES[cls]()
        response = client.get(f"/raise/{_name(cls)}")
        assert response.status_code == EXPECTED[cls][1], _name(cls)
        body = response.json()
        assert body["code"] == exc.code and body["status"] == response.status_code
        assert response.headers["content-type"] == problems.PROBLEM_JSON
        assert ("www-authenticate" in response.headers) is (cls is Unauthenticated)
        assert ("retry-after" in response.headers) is (response.status_code in (429, 503))
        if response.status_code == 429:  # the wait the refusal names, not a fixed second
            assert response.headers["retry-after"] == "3" == str(body["retry_after"])


# The errors a server can answer with: those of the layers' errors modules (ApiUnreachable and the
# BadAnswers are the client's own, and never on the wire).
ERROR_MODULES = {f"mnemo_sea.{layer}.errors" for layer in ("archive.rules", "retrieval", "context", "system")}
WIRE_ERRORS = [cls for cls in ERRORS if cls.__module__ in ERROR_MODULES]


def test_the_rest_client_rebuilds_every_error_from_its_problem_answer() -> None:
    """The way back: a problem answer becomes the class that was raised, with its message and
    detail (its attributes read back from them), the request id attached. An error of another
    module (the command line's own: reading files, eval traces, which no server answers with)
    comes back keeping its code and its answer on every surface, as a class of that code or
    of its category."""
    assert {ContextOverBudget, CacheUnavailable, BatchRejected, IndexLocked} <= set(WIRE_ERRORS)
    client = _raising_app()
    for cls in ERRORS:
        if issubclass(cls, BadAnswer):
            # The client's refusal of an answer never travels back to a client; and as a 500
            # (integrity, internal and misconfigured alike) it could not say which it is.
            continue
        exc: Any = FACTORIES[cls]()
        response = client.get(f"/raise/{_name(cls)}")
        # This app has no request ids of its own: the client's (sent as X-Request-ID) is kept.
        back: Any = error_of(Reply.of(response), Request("GET", "/raise", request_id=f"req-{_name(cls)}"))
        assert back.code == exc.code and back.message == exc.message, _name(cls)
        assert back.request_id == f"req-{_name(cls)}"
        assert outcomes.outcome_of(back) == outcomes.outcome_of(exc), _name(cls)
        if cls in WIRE_ERRORS:
            assert type(back) is cls, _name(cls)
            assert back.to_dict() == exc.to_dict()
            # The attributes a class offers beyond message and detail, read back the same.
            own = {k: v for k, v in vars(exc).items() if k not in ("message", "detail", "request_id")}
            assert {k: vars(back)[k] for k in own} == own, _name(cls)


def test_an_answer_without_a_class_of_its_own_is_its_categorys_most_general_class() -> None:
    app = FastAPI()
    problems.install(app)

    @app.get("/limited")
    def limited(n: int) -> None:  # n=x: REST's own request validation, `invalid_request`
        raise problems.ApiProblem(503, "not_ready", "unavailable: cache", components={"cache": {}})

    client = TestClient(app, raise_server_exceptions=False)
    invalid: Any = error_of(Reply.of(client.get("/limited?n=x")), Request("GET", "/limited"))
    assert type(invalid) is InvalidInput and invalid.code == "invalid_request"
    assert invalid.detail["errors"][0]["loc"] == ["query", "n"]
    not_ready: Any = error_of(Reply.of(client.get("/limited?n=1")), Request("GET", "/limited"))
    assert type(not_ready) is StoreUnavailable and not_ready.code == "not_ready"
    assert not_ready.detail == {"components": {"cache": {}}}
    assert [outcomes.general_class(c) for c in (C.CONFLICT, C.INTERNAL, C.MISCONFIGURED)] == [
        StateConflict,
        ArchiveError,
        IndexConfigMismatch,
    ]


def test_anything_else_is_an_internal_error_everywhere() -> None:
    exc = RuntimeError("a bug")
    assert outcomes.category_of(exc) is None
    assert outcomes.outcome_of(exc) == outcomes.Outcome(C.INTERNAL, 500, 1, "internal_error")
    payload = from_exception(exc, "some_tool").structured_content
    assert payload is not None and payload["error"] == "internal_error" and payload["category"] == "internal"
    assert exit_code_of(exc) == 1


def test_the_table_and_the_cli_policy_load_no_retrieval() -> None:
    """The CLI's early failures must not pay for importing the index stack."""
    code = (
        "import sys\n"
        "from mnemo_sea.cli.output import exit_code_of\n"
        "from mnemo_sea.archive import NotFound\n"
        "assert exit_code_of(NotFound('result', 'r1')) == 3\n"
        "assert not [m for m in sys.modules if m.startswith('mnemo_sea.retrieval')], 'retrieval loaded'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False, env=_env()
    )
    assert proc.returncode == 0, proc.stderr


# ---- a corrupt archive: typed by SQLite's result code, exit 7 with no message matching -----------


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["MNEMO_EMBEDDER"] = "hashing"
    return env | extra


def _cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from mnemo_sea.cli.app import main; main()", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env or _env(),
    )


def _damage_pages(path: Path) -> None:
    """Overwrite every page but the first: the header stays SQLite's, the tables are gone."""
    data = path.read_bytes()
    page_size = int.from_bytes(data[16:18], "big")
    path.write_bytes(data[:page_size] + b"\xff" * (len(data) - page_size))


def _archive_file(tmp_path: Path) -> Path:
    from mnemo_sea.archive import Archive

    path = tmp_path / "archive.db"
    Archive.open(str(path)).close()
    assert not Path(f"{path}-wal").exists()  # everything is in the file the test damages
    return path


def test_damaged_pages_are_store_corrupt_by_sqlites_code(tmp_path: Path) -> None:
    from mnemo_sea.archive import Archive

    path = _archive_file(tmp_path)
    _damage_pages(path)
    with pytest.raises(StoreCorrupt) as err:
        Archive.open(str(path))
    assert err.value.detail == {"database": str(path), "reason": "database disk image is malformed"}
    assert outcomes.outcome_of(err.value).exit_code == 7


def test_the_cli_exits_7_for_damaged_pages_behind_a_valid_header(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    assert _cli("init", "--data-dir", folder).returncode == 0
    _damage_pages(folder / "archive.db")
    proc = _cli("search", "x", "--data-dir", folder, "--json")
    assert proc.returncode == 7, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: archive database ") and "is corrupt" in proc.stderr
    assert '"code": "store_corrupt"' in proc.stdout


def test_the_worker_exits_7_on_a_corrupt_archive_database(tmp_path: Path) -> None:
    path = tmp_path / "archive.db"
    path.write_bytes(os.urandom(8192))
    env = _env(
        MNEMO_DATABASE_URL=f"sqlite+pysqlite:///{path}",
        MNEMO_QDRANT_URL=":memory:",
        MNEMO_RECEIPT_KEY="test-only-receipt-key-0123456789abcdef",
    )
    proc = _cli("worker", "--embedder", "hashing", env=env)
    assert proc.returncode == 7, proc.stderr
    assert proc.stderr.startswith("error: archive database ") and "Traceback" not in proc.stderr


def test_fields_a_newer_server_adds_to_an_answer_are_ignored_when_rebuilt() -> None:
    """A client older than the server still rebuilds the error: detail items of a structure it
    knows (a batch target, an index lock's holder) with fields it does not know lose only those."""
    targets = [{"result_id": "r1", "status": "protected", "message": "stays live", "since": "v9"}]
    batch: Any = outcomes.rebuild(BatchRejected, "batch rejected", {"targets": targets})
    assert [(t.result_id, t.status, t.message) for t in batch.targets] == [("r1", "protected", "stays live")]
    holder = {"pid": 7, "host": "h", "opened_at": "now", "program": "serve", "container": "c1"}
    locked: Any = outcomes.rebuild(IndexLocked, "index locked", {"path": "/d", "holder": holder})
    assert (locked.holder.pid, locked.holder.program) == (7, "serve")
