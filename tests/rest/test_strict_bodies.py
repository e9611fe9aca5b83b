"""Every REST body is strict: `true` is not 1, `"1000"` not 1000, `1` not `true`, and a time is
ISO-8601 text, never a number. The library refuses these (a typed InvalidInput), so REST must
too. The test reads every body of the OpenAPI document, so a number or boolean added later to any
body is covered."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mnemo_sea.archive.features.api_keys import create_key
from mnemo_sea.rest.app import create_app
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

# What each JSON type must refuse: the coercions pydantic's lax mode would make.
WRONG = {
    "integer": [True, "1000", 1000.5],
    "number": [True, "1000"],
    "boolean": ["true", 1],
}
PATH_VALUES = {"session_id": "s1", "result_id": "r1", "evidence_id": "e1", "owner": "o1"}


def scalars(
    schema: Mapping[str, Any], defs: Mapping[str, Any], at: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], str]]:
    """(place, JSON type) of every integer, number, boolean and date-time in a body schema; a
    list is entered through its first item ("0")."""
    if "$ref" in schema:
        yield from scalars(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, at)
        return
    for arm in schema.get("anyOf", ()):
        yield from scalars(arm, defs, at)
    kind = schema.get("type")
    if kind in WRONG:
        yield at, kind
    elif kind == "string" and schema.get("format") == "date-time":
        yield at, "date-time"
    elif kind == "array":
        items = schema.get("items", {})
        for i, item in enumerate(schema.get("prefixItems", ())):
            yield from scalars(item, defs, (*at, str(i)))
        if items:
            yield from scalars(items, defs, (*at, "0"))
    elif kind == "object":
        for name, prop in schema.get("properties", {}).items():
            yield from scalars(prop, defs, (*at, name))


def placed(at: tuple[str, ...], value: object) -> object:
    """A body holding `value` at `at` (and nothing else)."""
    if not at:
        return value
    head, rest = at[0], at[1:]
    if head.isdigit():
        return [None] * int(head) + [placed(rest, value)]
    return {head: placed(rest, value)}


def bodies(openapi: Mapping[str, Any]) -> Iterator[tuple[str, str, tuple[str, ...], str]]:
    defs = openapi["components"]["schemas"]
    for path, item in openapi["paths"].items():
        for method, operation in item.items():
            body = operation.get("requestBody")
            if body is None:
                continue
            url = path.format(**PATH_VALUES)
            for at, kind in scalars(body["content"]["application/json"]["schema"], defs, ()):
                yield method, url, at, kind


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str]]]:
    folder: Path = tmp_path_factory.mktemp("strict")
    mnemo = Mnemo.open(folder, embedder=HashingEmbedder())
    key, _ = create_key(mnemo.archive.store, tenant_id="ta", subject="admin-a", roles=["agent", "admin"])
    try:
        with TestClient(create_app(mnemo)) as client:
            yield client, {"Authorization": f"Bearer {key}"}
    finally:
        mnemo.close()


def test_every_number_boolean_and_time_of_every_body_refuses_coercion(
    api: tuple[TestClient, dict[str, str]],
) -> None:
    client, headers = api
    openapi = client.app.openapi()  # type: ignore[attr-defined]
    checked: set[str] = set()
    accepted: list[str] = []
    for method, url, at, kind in bodies(openapi):
        wrong = WRONG.get(kind, [1700000000, "1700000000"])  # a time is not a Unix time
        for value in wrong:
            response = client.request(method, url, json=placed(at, value), headers=headers)
            place = ["body", *at]
            refused = response.status_code == 422 and any(
                e["loc"] == place for e in response.json().get("errors", ())
            )
            if not refused:
                accepted.append(f"{method} {url} {'.'.join(at)}={value!r}: {response.status_code}")
        checked.add(f"{method} {url} {'.'.join(at)}")
    assert accepted == []
    # The walk reached the bodies the audit named and the nested ones.
    assert {
        "post /v1/sessions/s1/context budget_tokens",
        "post /v1/sessions/s1/context with_text",
        "post /v1/memory ttl_seconds",
        "post /v1/sessions/s1/task-state confirmed.0.version",
        "post /v1/citations/check citations.0.version",
        "post /v1/evidence observed_at",
        "post /v1/deletions/verify audit_seq",
        "post /v1/admin/audit/verify anchors.0.seq",
    } <= checked


def test_iso_times_and_plain_json_numbers_still_work(api: tuple[TestClient, dict[str, str]]) -> None:
    client, headers = api
    recorded = client.post(
        "/v1/sessions/s2/results",
        json={"tool_name": "lab", "content": "ALT 112", "observed_at": "2024-05-01T09:30:00+02:00"},
        headers=headers,
    )
    assert recorded.status_code == 201, recorded.text
    assert recorded.json()["observed_at"].startswith("2024-05-01T07:30:00")
    remembered = client.post(
        "/v1/memory",
        json={"owner": "o1", "key": "pet", "value": "cat", "provenance": "user_claim", "ttl_seconds": 3600},
        headers=headers,
    )
    assert remembered.status_code == 200, remembered.text
    context = client.post(
        "/v1/sessions/s2/context", json={"budget_tokens": 4000, "with_text": False}, headers=headers
    )
    assert context.status_code == 200, context.text
    assert context.json()["text"] is None
