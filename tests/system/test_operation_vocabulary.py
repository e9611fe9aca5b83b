"""One operation vocabulary: every surface names and types an operation's inputs as its record does.

The reference for each operation is its record (mnemo_sea/archive/rules/operations.py,
mnemo_sea/system/operations.py). The test reads what each surface actually accepts:

- Python: the `Mnemo` method's signature and the `Archive` method's (names, JSON types of the
  annotations, defaults);
- REST: the OpenAPI operation's path, query and header parameters and its request body
  (`create_app(...).openapi()`);
- MCP: the tool's published input schema (`TOOLS`, as `tools/list` publishes it);
- CLI: the click command's parameters (`typer.main.get_command`);
- the REST client: `MnemoClient`'s and `AsyncMnemoClient`'s methods of the facade's names (the
  facade's parameters without the principal, which the API key stands for).

For every surface the set of field names must equal the record's, plus what travels beside a
record (the session, the idempotency key), and each shared field must have the same JSON types.
The only other differences allowed are the ones listed in `OPERATIONS`, each with its reason,
and each is a transport matter (HTTP has no bytes, a shell has no JSON objects, a callback is
Python's). So a field added to one surface only, or typed differently on one, fails here.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import typer.main
from fakes import HashingEmbedder
from pydantic import BaseModel, TypeAdapter

from mnemo_sea.archive import Archive
from mnemo_sea.archive.rules import operations as ops
from mnemo_sea.cli.app import app as cli_app
from mnemo_sea.cli.context import UPDATE_FIELDS
from mnemo_sea.client import AsyncMnemoClient, MnemoClient
from mnemo_sea.mcp.tools import TOOLS
from mnemo_sea.rest.app import create_app
from mnemo_sea.system import operations as system_ops
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.settings import MnemoSettings

Types = frozenset[str]
# The options every CLI command shares (who acts, where) and its output switch: not inputs.
CLI_SHARED = frozenset({"data_dir", "tenant", "subject", "role", "clearance", "embedder", "as_json"})
SURFACES = ("mnemo", "archive", "rest", "mcp", "cli", "client", "async_client")
CLIENTS = {"client": MnemoClient, "async_client": AsyncMnemoClient}


@dataclass(frozen=True)
class Operation:
    """One operation on every surface that offers it (None: the surface does not)."""

    name: str
    record: type[Any]
    mnemo: str
    archive: str | None
    rest: tuple[str, str] | None  # (method, path)
    mcp: str | None
    cli: tuple[str, ...] | None  # the command's path under `mnemo-sea`
    in_session: bool = False  # the session travels beside the record: a path, MCP's session_id
    idempotent: bool = False  # an Idempotency-Key header, MCP's idempotency_key, a keyword
    # The record travels whole, as this one parameter, in Python (EvidenceInput).
    whole: str | None = None
    # Transport-level differences, per surface: fields a surface adds, fields it takes in another
    # form (and so lacks), fields it types otherwise. Each says why.
    extra: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    missing: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    retyped: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


# Retracted content comes back only on purpose: in Python and through `ingest --reactivate`, where
# a load of files meets a retraction; a REST or MCP write of it is refused (409).
REACTIVATE = "stores content equal to a retracted version as current again, deliberately"
RECEIPT_OUT = {"receipt_out": "where to write the deletion receipt: a file is the CLI's way to keep it"}

OPERATIONS = (
    Operation(
        "curate",
        system_ops.CurateOp,
        "curate",
        None,
        ("post", "/v1/sessions/{session_id}/curate"),
        "curate_context",
        ("session", "curate"),
        in_session=True,
        idempotent=True,
    ),
    Operation(
        "recall",
        system_ops.RecallOp,
        "recall",
        None,
        ("post", "/v1/sessions/{session_id}/recall"),
        None,  # MCP's one curation tool, curate_context, recalls through its `need`
        ("session", "recall"),
        in_session=True,
        idempotent=True,
    ),
    Operation(
        "record",
        ops.RecordOp,
        "record",
        "record",
        ("post", "/v1/sessions/{session_id}/results"),
        "record_result",
        ("session", "record"),
        in_session=True,
        idempotent=True,
        extra={
            "rest": {"content_base64": "JSON has no bytes: a binary original travels as base64"},
            "cli": {"file": "a binary original comes from a file (a shell argument is text)"},
        },
        retyped={"cli": {"arguments": "a shell has no JSON objects: --arguments is the object as JSON text"}},
    ),
    Operation(
        "archive_results",
        ops.ArchiveResultsOp,
        "archive_results",
        "archive_results",
        ("post", "/v1/sessions/{session_id}/archive"),
        "archive_results",
        ("session", "archive"),
        in_session=True,
        idempotent=True,
    ),
    Operation(
        "recover",
        ops.RecoverOp,
        "recover",
        "recover",
        ("post", "/v1/sessions/{session_id}/results/{result_id}/recover"),
        "recover_result",
        ("session", "recover"),
        in_session=True,
        idempotent=True,
        extra={
            surface: {"expected_sha256": "a hash the caller holds, checked against the answer"}
            for surface in CLIENTS
        },
    ),
    Operation(
        "live_view",
        ops.LiveViewOp,
        "live_view",
        "live_view",
        ("get", "/v1/sessions/{session_id}/live"),
        "live_context",
        ("session", "live"),
        in_session=True,
    ),
    Operation(
        "get_result",
        system_ops.GetResultOp,
        "get_result",
        None,  # the archive's read_result answers more (the archive time) for the citation checker
        ("get", "/v1/sessions/{session_id}/results/{result_id}"),
        "read_result",
        ("session", "show"),
        in_session=True,
        extra={
            "rest": {"content": "REST's reads name it `content`, as GET /v1/evidence/{id} does"},
            "cli": {"raw": "a shell writes the bytes alone to stdout, for `> file`"},
            **{
                surface: {"expected_sha256": "a hash the caller holds, checked against the answer"}
                for surface in CLIENTS
            },
        },
        missing={
            "rest": {"with_content": "named `content`, as its other reads name it"},
            "cli": {"with_content": "`session show` always shows what the result holds"},
        },
    ),
    Operation(
        "remember",
        ops.RememberOp,
        "remember",
        "remember",
        ("post", "/v1/memory"),
        "remember",
        ("memory", "remember"),
        idempotent=True,
    ),
    Operation(
        "forget",
        ops.ForgetOp,
        "forget",
        "forget",
        ("delete", "/v1/memory/{owner}"),
        None,
        ("memory", "forget"),
        idempotent=True,
        extra={"cli": RECEIPT_OUT},
    ),
    Operation(
        "update_task_state",
        ops.UpdateTaskStateOp,
        "update_task_state",
        "update_task_state",
        ("post", "/v1/sessions/{session_id}/task-state"),
        "update_task_state",
        ("session", "task-state", "set"),
        in_session=True,
        idempotent=True,
        # The whole next version is one JSON object: the CLI reads it from --file, whose keys are
        # the record's fields (checked by test_task_state_files_hold_the_records_fields).
        extra={"cli": {"file": "the update as a JSON object (a shell has no JSON objects)"}},
        missing={
            "cli": {
                name: "a key of the --file object"
                for name in ops.UpdateTaskStateOp.model_fields
                if name != "expected_version"
            }
        },
    ),
    Operation(
        "task_state",
        ops.TaskStateOp,
        "task_state",
        "task_state",
        ("get", "/v1/sessions/{session_id}/task-state"),
        "get_task_state",
        ("session", "task-state", "show"),
        in_session=True,
    ),
    Operation(
        "put_evidence",
        ops.EvidenceInput,
        "put_evidence",
        "put_evidence",
        ("post", "/v1/evidence"),
        None,
        None,  # `ingest` loads files into records: another operation (system/documents.py)
        idempotent=True,
        whole="item",
    ),
    Operation(
        "retract",
        ops.RetractOp,
        "retract",
        "retract",
        ("post", "/v1/evidence/retract"),
        None,
        ("evidence", "retract"),
        idempotent=True,
    ),
    Operation(
        "create_summary",
        ops.CreateSummaryOp,
        "create_summary",
        "create_summary",
        ("post", "/v1/summaries"),
        None,
        ("summary", "create"),
        idempotent=True,
    ),
    Operation(
        "delete_evidence",
        ops.DeleteEvidenceOp,
        "delete_evidence",
        "delete_evidence",
        ("delete", "/v1/evidence/{evidence_id}"),
        None,
        ("delete", "evidence"),
        idempotent=True,
        extra={"cli": RECEIPT_OUT},
    ),
    Operation(
        "delete_session",
        ops.DeleteSessionOp,
        "delete_session",
        "delete_session",
        ("delete", "/v1/sessions/{session_id}"),
        None,
        ("delete", "session"),
        in_session=True,
        idempotent=True,
        extra={"cli": RECEIPT_OUT},
    ),
    Operation(
        "delete_owner",
        ops.DeleteOwnerOp,
        "delete_owner",
        "delete_owner",
        ("delete", "/v1/owners/{owner}"),
        None,
        ("delete", "owner"),
        idempotent=True,
        extra={"cli": RECEIPT_OUT},
    ),
    Operation(
        "search",
        system_ops.SearchOp,
        "search",
        None,
        ("post", "/v1/search"),
        "search_evidence",
        ("search",),
    ),
    Operation(
        "context",
        system_ops.ContextOp,
        "context",
        None,
        ("post", "/v1/sessions/{session_id}/context"),
        "assemble_context",
        ("session", "context"),
        in_session=True,
        extra={
            "rest": {"with_text": "the answer's shape over HTTP (MCP returns the text once)"},
            "cli": {
                "instructions_file": "instructions are read from a file (UTF-8 text)",
                "tools_file": "tool definitions are a JSON list read from a file",
                "text": "print only the assembled text (output mode)",
            },
        },
        missing={
            "cli": {
                "instructions": "given as --instructions-file (see extra)",
                "tools": "given as --tools-file (see extra)",
            }
        },
    ),
    Operation(
        "check_citations",
        system_ops.CheckCitationsOp,
        "check_citations",
        None,
        ("post", "/v1/citations/check"),
        "check_citations",
        None,  # `eval citations` checks a JSONL file of many answers: another operation
    ),
    Operation(
        "ingest",
        system_ops.IngestOp,
        "ingest",
        "write_evidence_batch",
        ("post", "/v1/evidence/batch"),
        None,
        None,  # `ingest` loads files and folders in batches: mnemo_sea/cli/bulk_ingest.py
        idempotent=True,
        extra={
            "mnemo": {
                "progress": "a Python callback reporting progress",
                "reactivate": REACTIVATE,
            },
            "archive": {"reactivate": REACTIVATE},
        },
    ),
)


# ---- what a JSON schema says ---------------------------------------------------------------------


def json_types(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Types:
    """The JSON types a schema admits, `null` aside (optional is not a type of its own here)."""
    if "$ref" in schema:
        return json_types(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    found: set[str] = set()
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in schema.get(key, ()):
            found |= json_types(branch, defs)
    kind = schema.get("type")
    if isinstance(kind, str):
        found.add(kind)
    elif isinstance(kind, list):
        found.update(kind)
    if not found and "enum" in schema:
        found.update(type(v).__name__ for v in schema["enum"])
    if not found and not any(k in schema for k in ("anyOf", "oneOf", "allOf")):
        found.add("any")  # {}: anything
    return frozenset(found - {"null"})


def schema_fields(schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> dict[str, Types]:
    defs = schema.get("$defs", {}) if defs is None else defs
    return {name: json_types(prop, defs) for name, prop in schema.get("properties", {}).items()}


def record_schema(record: type[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = TypeAdapter(record).json_schema()
    return schema


def record_defaults(record: type[Any]) -> dict[str, Any]:
    """Each optional field's default (a factory's value); required fields are absent."""
    out: dict[str, Any] = {}
    if isinstance(record, type) and issubclass(record, BaseModel):
        for name, info in record.model_fields.items():
            if info.default_factory is not None:
                out[name] = info.default_factory()  # type: ignore[call-arg]
            elif not info.is_required():
                out[name] = info.default
        return out
    for f in dataclasses.fields(record):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


# ---- each surface ----------------------------------------------------------------------------------


def python_fields(method: Any) -> tuple[dict[str, Types], dict[str, Any], set[str]]:
    """A `Mnemo`/`Archive` method's parameters but the principal, or a client's (which has none):
    JSON types, defaults, required."""
    hints = typing.get_type_hints(method, include_extras=True)
    params = list(inspect.signature(method).parameters.values())
    caller = (
        [] if method.__qualname__.split(".")[0] in {c.__name__ for c in CLIENTS.values()} else ["principal"]
    )
    assert [p.name for p in params[: 1 + len(caller)]] == ["self", *caller], method
    types: dict[str, Types] = {}
    defaults: dict[str, Any] = {}
    required: set[str] = set()
    for p in params[1 + len(caller) :]:
        try:
            schema = TypeAdapter(hints[p.name]).json_schema()
        except Exception:
            schema = {"type": "python"}
        types[p.name] = json_types(schema, schema.get("$defs", {}))
        if p.default is inspect.Parameter.empty:
            required.add(p.name)
        else:
            defaults[p.name] = p.default
    return types, defaults, required


def rest_fields(openapi: Mapping[str, Any], method: str, path: str) -> dict[str, Types]:
    operation = openapi["paths"][path][method]
    defs = openapi["components"]["schemas"]
    out: dict[str, Types] = {}
    for param in operation.get("parameters", ()):
        name = param["name"]
        if param["in"] == "header":
            # HTTP's own spelling of the keyword: Idempotency-Key is idempotency_key.
            name = name.lower().replace("-", "_")
        out[name] = json_types(param["schema"], defs)
    body = operation.get("requestBody")
    if body is not None:
        schema = body["content"]["application/json"]["schema"]
        # An optional body (recover's span) is the record or null.
        schema = next((s for s in schema.get("anyOf", ()) if "$ref" in s), schema)
        if "$ref" in schema:
            schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
        out |= schema_fields(schema, defs)
    return out


def mcp_fields(tool_name: str) -> dict[str, Types]:
    (tool,) = [t for t in TOOLS if t.name == tool_name]
    return schema_fields(tool.inputs.model_json_schema())


def cli_command(path: tuple[str, ...]) -> Any:
    """The command object typer builds for `mnemo-sea <path>` (typer bundles its own click)."""
    command: Any = typer.main.get_command(cli_app)
    for name in path:
        found = command.get_command(None, name)
        assert found is not None, f"no CLI command {' '.join(path)}"
        command = found
    return command


def cli_types(param: Any) -> Types:
    """A parameter's JSON types, from the Python type typer parses it as (str, int, list[str]...)."""
    schema = TypeAdapter(param.type_descriptor.annotation).json_schema()
    return json_types(schema, {})


def cli_fields(path: tuple[str, ...]) -> dict[str, Types]:
    params = [p for p in cli_command(path).params if p.name not in CLI_SHARED]
    return {p.name: cli_types(p) for p in params}


# ---- the comparison --------------------------------------------------------------------------------


def beside(op: Operation) -> dict[str, Types]:
    """What travels beside the record on this surface: the session, the idempotency key."""
    out: dict[str, Types] = {}
    if op.in_session:
        out["session_id"] = frozenset({"string"})
    if op.idempotent:
        out["idempotency_key"] = frozenset({"string"})
    return out


def expected_fields(op: Operation, surface: str) -> dict[str, Types]:
    record = schema_fields(record_schema(op.record))
    if op.whole is not None and surface in ("mnemo", "archive", *CLIENTS):
        record = {op.whole: frozenset({"object"})}
    wanted = {**beside(op), **record}
    for name in op.missing.get(surface, {}):
        wanted.pop(name)
    return wanted


def differences(op: Operation, surface: str, actual: Mapping[str, Types]) -> list[str]:
    """What the surface does differently from the record, beyond the listed exceptions."""
    wanted = expected_fields(op, surface)
    allowed_extra = set(op.extra.get(surface, {}))
    problems = [f"{surface} lacks {name}" for name in sorted(set(wanted) - set(actual))]
    problems += [f"{surface} adds {name}" for name in sorted(set(actual) - set(wanted) - allowed_extra)]
    retyped = op.retyped.get(surface, {})
    for name in sorted(set(wanted) & set(actual)):
        if name not in retyped and actual[name] != wanted[name]:
            problems.append(
                f"{surface}.{name} is {sorted(actual[name])}, the record's {sorted(wanted[name])}"
            )
    return problems


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder: Path = tmp_path_factory.mktemp("vocabulary")
    mnemo = Mnemo.open(folder, embedder=HashingEmbedder())
    try:
        settings = MnemoSettings(data_dir=folder, database_url=None)
        yield create_app(mnemo, settings).openapi()
    finally:
        mnemo.close()


def surface_fields(op: Operation, surface: str, openapi: Mapping[str, Any]) -> dict[str, Types] | None:
    if surface == "mnemo":
        return python_fields(getattr(Mnemo, op.mnemo))[0]
    if surface == "archive":
        return None if op.archive is None else python_fields(getattr(Archive, op.archive))[0]
    if surface in CLIENTS:
        return python_fields(getattr(CLIENTS[surface], op.mnemo))[0]
    if surface == "rest":
        return None if op.rest is None else rest_fields(openapi, *op.rest)
    if surface == "mcp":
        return None if op.mcp is None else mcp_fields(op.mcp)
    return None if op.cli is None else cli_fields(op.cli)


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_every_surface_names_and_types_the_inputs_as_the_record(
    op: Operation, openapi: dict[str, Any]
) -> None:
    problems: list[str] = []
    for surface in SURFACES:
        actual = surface_fields(op, surface, openapi)
        if actual is not None:
            problems += differences(op, surface, actual)
    assert not problems, f"{op.name}: " + "; ".join(problems)


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_the_python_methods_take_the_records_defaults(op: Operation) -> None:
    """`Mnemo` and `Archive` are thin wrappers: a field the record makes optional has the same
    default there (an empty sequence for a list), and a required one is required."""
    if op.whole is not None:
        return
    wanted = record_defaults(op.record)
    required = {n for n in schema_fields(record_schema(op.record)) if n not in wanted}
    owners: dict[str, Any] = {"mnemo": Mnemo, "archive": Archive, **CLIENTS}
    for owner, name in (("mnemo", op.mnemo), ("archive", op.archive), *((c, op.mnemo) for c in CLIENTS)):
        if name is None:
            continue
        _, defaults, needed = python_fields(getattr(owners[owner], name))
        for field_name, default in wanted.items():
            if field_name in op.missing.get(owner, {}):
                continue
            got = defaults.get(field_name)
            same = list(got) == default if isinstance(default, list) else got == default
            assert same, f"{owner}.{name}({field_name}=...) defaults to {got!r}, the record to {default!r}"
        assert required - set(op.missing.get(owner, {})) <= needed, (owner, name)


def test_every_tool_and_every_write_route_is_an_operation(openapi: dict[str, Any]) -> None:
    """No surface offers an operation the table above does not compare."""
    assert {t.name for t in TOOLS} == {op.mcp for op in OPERATIONS if op.mcp is not None}
    compared = {op.rest for op in OPERATIONS if op.rest is not None}
    writes = {
        (method, path)
        for path, item in openapi["paths"].items()
        for method in item
        if method in ("post", "delete") and not path.startswith(("/v1/admin", "/v1/deletions"))
    }
    # Housekeeping without inputs of its own: the tenant's expired memory, now.
    assert writes - compared == {("post", "/v1/memory/purge-expired")}


def test_task_state_files_hold_the_records_fields() -> None:
    assert set(UPDATE_FIELDS) == set(ops.UpdateTaskStateOp.model_fields)


def test_the_comparison_catches_a_field_on_one_surface_only() -> None:
    """The check itself can fail: a field added to one surface, dropped from one, or retyped."""
    (op,) = [o for o in OPERATIONS if o.name == "remember"]
    fields = expected_fields(op, "mcp")
    assert differences(op, "mcp", fields) == []
    assert differences(op, "mcp", {**fields, "ttl": frozenset({"string"})}) == ["mcp adds ttl"]
    assert differences(op, "mcp", {k: v for k, v in fields.items() if k != "owner"}) == ["mcp lacks owner"]
    assert differences(op, "mcp", {**fields, "ttl_seconds": frozenset({"integer"})}) == [
        "mcp.ttl_seconds is ['integer'], the record's ['number']"
    ]


def test_the_archive_and_the_index_name_the_same_search_kinds() -> None:
    """archive/ and retrieval/ never import each other, so each keeps its list of what a search
    may ask for: the archive's (`SearchKind`, which every surface's `kinds` is typed by) and the
    index's (what it accepts in a filter). They must be one vocabulary."""
    from mnemo_sea.archive.rules.records import EVIDENCE_KINDS, ORIGINAL_KIND, SEARCH_KINDS
    from mnemo_sea.retrieval.fields import KINDS

    assert frozenset(SEARCH_KINDS) == KINDS
    assert set(SEARCH_KINDS) == {*EVIDENCE_KINDS, ORIGINAL_KIND}
