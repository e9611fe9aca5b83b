"""Every input of every operation has a size cap (mnemo_sea/archive/rules/limits.py), enforced the
same on every surface before any work: a value over it is refused (REST 422 naming the field, or
413 for an original; MCP `invalid_input`/`too_large`; Python InvalidInput naming the field and
the limit) before anything is rendered, tokenized, embedded or read from the archive.

The audit's case: tool definitions sent to assemble a context had no size cap, and megabytes of
tool text cost seconds of CPU (canonical JSON, then the tokenizer) before the answer. Here a
few megabytes are refused, and counters prove the renderer, the tokenizer, the search and the
archive reads were never reached.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Iterator, Mapping
from dataclasses import is_dataclass
from typing import Annotated, Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from mcp_types import TextContent
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

import mnemo_sea.context.render as render
import mnemo_sea.system.mnemo as mnemo_module
from mnemo_sea.archive import ContentTooLarge, InvalidInput, Principal, Role, Sensitivity, limits
from mnemo_sea.archive.features.api_keys import create_key
from mnemo_sea.archive.rules import checks as archive_checks
from mnemo_sea.archive.rules import operations as archive_ops
from mnemo_sea.archive.rules.operations import check_caps
from mnemo_sea.mcp import build_server, fixed_principal
from mnemo_sea.mcp.tools import TOOLS
from mnemo_sea.rest.app import create_app
from mnemo_sea.retrieval import fields as retrieval_fields
from mnemo_sea.retrieval import query as retrieval_query
from mnemo_sea.system import operations as system_ops
from mnemo_sea.system.mnemo import Mnemo

AGENT = Principal("ta", "agent-a", frozenset({Role.AGENT}), Sensitivity.INTERNAL)


def records() -> list[type[Any]]:
    """Every record the operations modules declare (an operation's inputs or a nested input):
    a record added later is in this list without anyone adding it here."""
    found: list[type[Any]] = []
    for module in (archive_ops, system_ops):
        for name in module.__all__:
            value = getattr(module, name)
            ours = isinstance(value, type) and value.__module__ == module.__name__
            if ours and (issubclass(value, BaseModel) or is_dataclass(value)):
                found.append(value)
    return found


# ---- what a schema says about caps ----------------------------------------------------------------


def uncapped(schema: Mapping[str, Any], defs: Mapping[str, Any], at: str, seen: set[str]) -> list[str]:
    """The places of `schema` where a text, a list or a free JSON object has no cap."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            return []
        return uncapped(defs[name], defs, at, seen | {name})
    if "x-max-json-chars" in schema:
        return []  # the whole value, whatever its shape, is capped
    out: list[str] = []
    for arm in [*schema.get("anyOf", ()), *schema.get("oneOf", ()), *schema.get("allOf", ())]:
        out += uncapped(arm, defs, at, seen)
    kind = schema.get("type")
    if kind == "string" and not ({"maxLength", "enum", "const"} & set(schema) or schema.get("format")):
        out.append(f"{at}: text without maxLength")
    if kind == "array":
        if "maxItems" not in schema:
            out.append(f"{at}: list without maxItems")
        out += uncapped(schema.get("items", {}), defs, f"{at}[]", seen)
    if kind == "object":
        properties = schema.get("properties", {})
        for name, prop in properties.items():
            out += uncapped(prop, defs, f"{at}.{name}" if at else name, seen)
        extra = schema.get("additionalProperties", not properties)
        if extra is True or (isinstance(extra, dict) and not extra):
            out.append(f"{at}: object of any size")
        elif isinstance(extra, dict):
            out += uncapped(extra, defs, f"{at}{{}}", seen)
    return out


def schema_uncapped(schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> list[str]:
    return uncapped(schema, schema.get("$defs", {}) if defs is None else defs, "", set())


@pytest.mark.parametrize("record", records(), ids=lambda r: r.__name__)
def test_every_text_list_and_object_of_every_record_is_capped(record: type[Any]) -> None:
    """A field added later without a cap fails here."""
    assert schema_uncapped(TypeAdapter(record).json_schema()) == []


def test_the_cap_check_finds_an_uncapped_field() -> None:
    """The check itself can fail: a text, a list and an object without caps are each named."""

    class Loose(BaseModel):
        name: str
        items: list[int]
        blob: dict[str, Any]

    assert schema_uncapped(Loose.model_json_schema()) == [
        "name: text without maxLength",
        "items: list without maxItems",
        "blob: object of any size",
    ]


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_every_mcp_tool_input_is_capped(tool: Any) -> None:
    assert schema_uncapped(tool.inputs.model_json_schema()) == []


def test_every_rest_body_of_an_operation_is_capped(rest: tuple[TestClient, dict[str, str]]) -> None:
    client, _ = rest
    openapi = client.app.openapi()  # type: ignore[attr-defined]
    defs = openapi["components"]["schemas"]
    problems: list[str] = []
    for path, item in openapi["paths"].items():
        for method, operation in item.items():
            body = operation.get("requestBody")
            if body is None or path.startswith(("/v1/admin", "/v1/deletions")):
                continue  # audit anchors and deletion receipts are documents the server signed
            schema = body["content"]["application/json"]["schema"]
            problems += [f"{method} {path} {p}" for p in uncapped(schema, defs, "", set())]
            for param in operation.get("parameters", ()):
                if param["in"] == "header":
                    problems += [
                        f"{method} {path} {p}" for p in uncapped(param["schema"], defs, param["name"], set())
                    ]
    assert problems == []


def test_the_retrieval_layer_holds_the_same_query_caps() -> None:
    """retrieval is a layer of its own (no import of the archive): its limits must be the table's."""
    assert retrieval_query.MAX_QUERY_CHARS == limits.QUERY_CHARS
    assert retrieval_query.MAX_FILTER_VALUES == limits.FILTER_VALUES


def test_the_index_takes_every_label_the_archive_stores() -> None:
    """A record's source and scope become the index's labels: whatever the archive accepts, the
    index must accept too, or the record is stored and never searchable."""
    assert max(limits.SOURCE_CHARS, limits.SCOPE_CHARS) <= retrieval_fields.MAX_LABEL_CHARS
    assert archive_checks.LABEL_CONTROL.pattern == retrieval_fields._CONTROL.pattern
    assert archive_checks.TOOL_NAME_COLUMN <= retrieval_fields.MAX_LABEL_CHARS  # a note's source


# ---- every cap, enforced on Python callers -----------------------------------------------------------


def over_cap(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> tuple[object, int] | None:
    """A value just over the field's cap and the cap, or None for a field capped by its vocabulary."""
    if "$ref" in schema:
        return None  # a nested record: its own fields are checked as that record's
    if "prefixItems" in schema:
        return None  # a pair (recover's lines): its length is its shape, checked as a type, not a cap
    if "x-max-json-chars" in schema:
        n = schema["x-max-json-chars"]
        return {"text": "x" * n}, n
    if "maxLength" in schema:
        n = schema["maxLength"]
        return "x" * (n + 1), n
    if "maxItems" in schema:
        n = schema["maxItems"]
        return ["x"] * (n + 1), n
    for arm in schema.get("anyOf", ()):
        found = over_cap(arm, defs)
        if found is not None:
            return found
    return None


def capped_fields(record: type[Any]) -> list[tuple[str, object, int]]:
    schema = TypeAdapter(record).json_schema()
    out = []
    for name, prop in schema.get("properties", {}).items():
        found = over_cap(prop, schema.get("$defs", {}))
        if found is not None:
            out.append((name, *found))
    return out


@pytest.mark.parametrize("record", records(), ids=lambda r: r.__name__)
def test_python_callers_get_every_cap_as_invalid_input_naming_the_field(record: type[Any]) -> None:
    for name, value, limit in capped_fields(record):
        with pytest.raises(InvalidInput) as e:
            check_caps(record, {name: value})
        assert e.value.field == name, (record.__name__, name)
        assert e.value.detail["limit"] == limit, (record.__name__, name)


def test_a_nested_item_over_its_cap_is_named_by_its_place() -> None:
    targets = [
        {"result_id": "r1", "note": "fine"},
        {"result_id": "r2", "note": "x" * (limits.NOTE_CHARS + 1)},
    ]
    with pytest.raises(InvalidInput) as e:
        check_caps(archive_ops.ArchiveResultsOp, {"targets": targets})
    assert (e.value.field, e.value.detail["limit"]) == ("targets[1].note", limits.NOTE_CHARS)


def test_an_original_over_the_ceiling_is_content_too_large() -> None:
    with pytest.raises(ContentTooLarge) as e:
        check_caps(archive_ops.RecordOp, {"content": b"x" * (limits.CONTENT_BYTES + 1)})
    assert (e.value.field, e.value.limit) == ("content", limits.CONTENT_BYTES)


def test_measuring_a_json_value_stops_at_the_cap() -> None:
    deep: Any = "x"
    for _ in range(limits.JSON_DEPTH + 1):
        deep = [deep]
    assert limits.json_size(deep, 10_000) is None
    assert limits.json_size({"a": [1, True, None, "bc"]}, 100) == len(
        json.dumps({"a": [1, True, None, "bc"]}, separators=(",", ":"))
    )
    assert limits.json_size({"a": "x" * 20}, 10) is None


def _nested_lists(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def _nested_objects(levels: int) -> Any:
    value: Any = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize("nest", [_nested_lists, _nested_objects])
def test_a_field_and_a_document_count_json_depth_alike(nest: Any) -> None:
    # One definition of depth (`[]`/`{}` are 1, a scalar 0): the field cap (json_size, JsonCap)
    # and the document check (json_text.json_depth_over) accept and refuse the same values.
    from mnemo_sea.system.json_text import json_depth_over

    at, over = nest(limits.JSON_DEPTH), nest(limits.JSON_DEPTH + 1)
    assert limits.json_size(at, 10_000) is not None and not json_depth_over(at, limits.JSON_DEPTH)
    assert limits.json_size(over, 10_000) is None and json_depth_over(over, limits.JSON_DEPTH)
    assert not json_depth_over(1, 0) and limits.json_size(1, 10, depth=0) == 1  # a scalar is 0 levels
    assert json_depth_over([], 0) and limits.json_size([], 10, depth=0) is None  # `[]` is 1


def test_tool_arguments_at_the_field_limit_pass_and_one_level_more_is_json_too_deep() -> None:
    from mnemo_sea.system.errors import JsonTooDeep

    check_caps(archive_ops.RecordOp, {"arguments": _nested_objects(limits.JSON_DEPTH)})
    with pytest.raises(JsonTooDeep) as e:
        check_caps(archive_ops.RecordOp, {"arguments": _nested_objects(limits.JSON_DEPTH + 1)})
    assert (e.value.field, e.value.limit, e.value.code) == ("arguments", limits.JSON_DEPTH, "json_too_deep")
    # The same field over pydantic (REST and MCP validate the records so): the same code and limit.
    with pytest.raises(ValidationError) as v:
        archive_ops.RecordOp.model_validate(
            {"tool_name": "t", "content": "x", "arguments": _nested_objects(limits.JSON_DEPTH + 1)}
        )
    [error] = v.value.errors()
    assert (error["type"], error["ctx"]["limit"]) == ("json_too_deep", limits.JSON_DEPTH)


def test_a_document_is_allowed_a_fixed_allowance_above_the_field_limit() -> None:
    from mnemo_sea.system.json_text import MAX_JSON_DEPTH

    assert MAX_JSON_DEPTH == limits.DOCUMENT_JSON_DEPTH > limits.JSON_DEPTH


# ---- the audit's repro: megabytes of tool definitions --------------------------------------------------

# The audit's payload, smaller: three megabytes of tool text (the cap of all of them together
# is checked first, so this is refused before any one of them is looked at).
MEGABYTES = [{"name": f"tool{i}", "description": "x" * 1_000_000} for i in range(3)]
# One definition over TOOL_DEFINITION_CHARS, the list under TOOLS_CHARS.
ONE_TOO_LARGE = [{"name": "small", "description": "fine"}, {"name": "big", "description": "y" * 150_000}]


class Work:
    """Counts every step a context costs: rendering the tools, counting tokens, searching,
    reading the session from the archive, assembling."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, mnemo: Mnemo) -> None:
        self.calls: list[str] = []
        for owner, name in (
            (render, "tool_definition"),
            (mnemo_module, "gather"),
            (mnemo_module, "assemble"),
            (mnemo_module, "tool_texts"),
            (mnemo_module, "check_instructions"),
        ):
            monkeypatch.setattr(owner, name, self._counted(name, getattr(owner, name)))
        monkeypatch.setattr(mnemo, "search", self._counted("search", mnemo.search))
        counter = mnemo.token_counter
        monkeypatch.setattr(counter, "count", self._counted("count", counter.count))

    def _counted(self, name: str, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return fn(*args, **kwargs)

        call.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
        return call


@pytest.fixture
def rest(mnemo: Mnemo) -> Iterator[tuple[TestClient, dict[str, str]]]:
    key, _ = create_key(mnemo.archive.store, tenant_id="ta", subject="agent-a", roles=["agent"])
    with TestClient(create_app(mnemo)) as client:
        yield client, {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize(
    ("tools", "field", "limit"),
    [(MEGABYTES, "tools", limits.TOOLS_CHARS), (ONE_TOO_LARGE, "tools.1", limits.TOOL_DEFINITION_CHARS)],
    ids=["megabytes", "one-too-large"],
)
def test_oversized_tool_definitions_are_refused_before_any_work_on_every_surface(
    mnemo: Mnemo,
    rest: tuple[TestClient, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    tools: list[dict[str, str]],
    field: str,
    limit: int,
) -> None:
    mnemo.record(AGENT, "s1", "lab", "a result")
    work = Work(monkeypatch, mnemo)
    body = {"budget_tokens": 8000, "tools": tools, "query": "result"}

    client, headers = rest
    response = client.post("/v1/sessions/s1/context", json=body, headers=headers)
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert [(".".join(e["loc"][1:]), e["limit"]) for e in errors] == [(field, limit)]

    async def over_mcp() -> Any:
        async with Client(build_server(mnemo, fixed_principal(AGENT))) as mcp:
            return await mcp.call_tool("assemble_context", {"session_id": "s1", **body})

    answer = anyio.run(over_mcp)
    assert answer.is_error
    assert isinstance(answer.content[0], TextContent)
    refused = json.loads(answer.content[0].text)
    assert refused["error"] == "invalid_input"
    assert [p["field"] for p in refused["problems"]] == [field]

    with pytest.raises(InvalidInput) as e:
        mnemo.context(AGENT, "s1", **body)  # type: ignore[arg-type]
    assert (e.value.field, e.value.detail["limit"]) == (field.replace(".1", "[1]"), limit)

    assert work.calls == []  # nothing rendered, counted, searched, read or assembled


def test_tool_definitions_within_their_caps_are_assembled(
    mnemo: Mnemo, rest: tuple[TestClient, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caps refuse only what is over them: the same call just under them does the work."""
    mnemo.record(AGENT, "s1", "lab", "a result")
    work = Work(monkeypatch, mnemo)
    tools = [{"name": f"tool{i}", "description": "word " * 200} for i in range(3)]
    client, headers = rest
    response = client.post(
        "/v1/sessions/s1/context", json={"budget_tokens": 8000, "tools": tools}, headers=headers
    )
    assert response.status_code == 200, response.text
    assert response.json()["totals"]["tools"] > 0
    assert {"tool_definition", "gather", "assemble", "count"} <= set(work.calls)


def test_a_field_over_its_cap_is_the_same_refusal_on_rest_mcp_and_python(
    mnemo: Mnemo, rest: tuple[TestClient, dict[str, str]]
) -> None:
    """One cap (limits.QUERY_CHARS), three surfaces, each naming the field."""
    query = "x" * (limits.QUERY_CHARS + 1)
    client, headers = rest
    response = client.post("/v1/search", json={"query": query}, headers=headers)
    assert response.status_code == 422
    assert [(e["loc"], e["limit"]) for e in response.json()["errors"]] == [
        (["body", "query"], limits.QUERY_CHARS)
    ]

    async def over_mcp() -> Any:
        async with Client(build_server(mnemo, fixed_principal(AGENT))) as mcp:
            return await mcp.call_tool("search_evidence", {"query": query})

    answer = anyio.run(over_mcp)
    assert isinstance(answer.content[0], TextContent)
    assert [p["field"] for p in json.loads(answer.content[0].text)["problems"]] == ["query"]

    with pytest.raises(InvalidInput) as e:
        mnemo.search(AGENT, query)
    assert (e.value.field, e.value.detail["limit"]) == ("query", limits.QUERY_CHARS)


def test_mcp_tool_inputs_enforce_every_cap_of_their_record() -> None:
    """The tools' inputs are the records: each top-level cap is refused naming the field."""
    for tool in TOOLS:
        for name, value, _limit in capped_fields(tool.inputs):
            try:
                tool.inputs.model_validate({name: value})
            except ContentTooLarge as e:
                assert e.field == name
            except ValidationError as e:
                assert any(err["loc"][:1] == (name,) and "too" in err["type"] for err in e.errors()), (
                    tool.name,
                    name,
                    e.errors(),
                )
            else:
                raise AssertionError(f"{tool.name}.{name} accepted a value over its cap")


def test_a_policy_may_lower_a_limit_never_raise_it() -> None:
    from mnemo_sea.archive.rules.policy import ArchivePolicy

    assert ArchivePolicy(max_note_chars=10).max_note_chars == 10
    with pytest.raises(InvalidInput) as e:
        ArchivePolicy(max_content_bytes=limits.CONTENT_BYTES + 1)
    assert e.value.field == "max_content_bytes"


def test_a_none_value_is_skipped_only_where_no_json_cap_would_measure_it() -> None:
    """check_caps passes a None over without a look (a search passes several), except under a JSON
    cap, which measures None as `null`: a cap too small for `null` still refuses it."""

    @dataclasses.dataclass
    class Tiny:
        text: Annotated[str | None, Field(max_length=1)] = None
        blob: Annotated[dict[str, Any] | None, limits.JsonCap(3)] = None
        nested: Annotated[dict[str, Any] | None, Field(), limits.JsonCap(3)] = None

    check_caps(Tiny, {"text": None})
    with pytest.raises(InvalidInput, match="blob"):
        check_caps(Tiny, {"blob": None})
    with pytest.raises(InvalidInput, match="nested"):
        check_caps(Tiny, Tiny(nested=None, blob={}))
    with pytest.raises(InvalidInput, match="text"):
        check_caps(Tiny, Tiny(text="ab"))
