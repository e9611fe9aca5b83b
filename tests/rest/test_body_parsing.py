"""A request body costs its parse only to a caller with a key, and never more than its limits.

Found after the caps of every field: the body was parsed on the event loop before the key was
looked at, so one anonymous 40 MiB body of `[],[],...` held every tenant's requests for 7 s in
`json.loads` and 77 s in the depth check. These tests watch what the server does with the
bytes (how much of the body it pulled, whether the parser ran, on which thread), not how long
it took: nothing here reads a clock.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from rest_helpers import Api, assert_problem
from starlette.types import Message, Receive, Scope, Send

from mnemo_sea.archive.rules.limits import BODY_JSON_VALUES, TOOLS_VALUES, json_values_over
from mnemo_sea.rest import json_bodies

JSON = {"Content-Type": "application/json"}


class BodyWatch:
    """The app behind a shim that counts the body bytes the server pulls from the client."""

    def __init__(self, api: Api) -> None:
        self.app = api.system.app
        self.pulled = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def counted() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                self.pulled += len(message.get("body", b""))
            return message

        await self.app(scope, counted, send)


def containers(count: int) -> bytes:
    """A JSON body of `count` empty arrays: the shape that held the parser longest per byte."""
    return b'{"query": "x", "junk": [' + b",".join([b"[]"] * count) + b"]}"


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """One entry per body the server parsed: whether it was parsed on the event loop."""
    seen: list[bool] = []
    real = json_bodies._parsed

    def watched(body: bytes) -> Any:
        try:
            asyncio.get_running_loop()
            seen.append(True)
        except RuntimeError:  # a worker thread has no running loop
            seen.append(False)
        return real(body)

    monkeypatch.setattr(json_bodies, "_parsed", watched)
    return seen


def test_a_body_without_a_valid_key_is_refused_before_a_byte_of_it_is_read(
    api: Api, parses: list[bool]
) -> None:
    watch = BodyWatch(api)
    client = TestClient(watch)
    body = containers(20_000)
    for headers in (JSON, {**JSON, "Authorization": "Bearer msk_not-a-key"}, {**JSON, "X-API-Key": "nope"}):
        assert_problem(client.post("/v1/search", content=body, headers=headers), 401, "unauthenticated")
    assert watch.pulled == 0 and parses == []

    # With a key the same body is read and parsed (then refused by the strict body: 422).
    answer = client.post("/v1/search", content=body, headers={**JSON, **api.headers("agent")})
    assert_problem(answer, 422)
    assert watch.pulled == len(body) and len(parses) == 1


def test_a_body_of_any_type_without_a_key_is_refused_before_it_is_read(api: Api, parses: list[bool]) -> None:
    watch = BodyWatch(api)
    client = TestClient(watch)
    for content_type in ("text/plain", "application/octet-stream", "multipart/form-data; boundary=x"):
        answer = client.post("/v1/search", content=b"x" * 100_000, headers={"Content-Type": content_type})
        assert_problem(answer, 401, "unauthenticated")
    assert watch.pulled == 0 and parses == []


def test_a_body_that_is_not_utf8_json_is_refused_unparsed(api: Api) -> None:
    """json.loads reads UTF-16 and UTF-32 too, where the value count's byte scan would be blind:
    such a body is no JSON here (RFC 8259), whatever it holds."""
    agent = {**JSON, **api.headers("agent")}
    for encoding in ("utf-16-le", "utf-16", "utf-32"):
        body = json.dumps({"query": "dose"}).encode(encoding)
        problem = assert_problem(
            api.client.post("/v1/search", content=body, headers=agent), 422, "invalid_input"
        )
        assert "UTF-8" in problem["detail"] and problem["field"] == "body", problem
    assert api.client.post("/v1/search", json={"query": "dose"}, headers=agent).status_code == 200


def test_the_largest_tools_the_caps_admit_pass_under_the_body_limit_and_one_more_value_is_422(
    api: Api,
) -> None:
    """Tool definitions of `[]`s, the densest JSON there is: TOOLS_VALUES of them are accepted
    (the body is under BODY_JSON_VALUES), one more is the field's 422, naming the limit."""
    agent = {**JSON, **api.headers("agent")}

    def body(extra: int) -> bytes:
        # Ten tools {"a": [[], ...]} of k `[]`s each hold 20 + 2 x (the sum of k) values.
        k = (TOOLS_VALUES - 20) // 20
        tools = [{"a": [[]] * (k + (extra if i == 0 else 0))} for i in range(10)]
        assert 20 + 2 * (10 * k + extra) == TOOLS_VALUES + 2 * extra
        return json.dumps({"budget_tokens": 1000, "tools": tools}, separators=(",", ":")).encode()

    at_cap = body(0)
    assert not json_values_over(at_cap, BODY_JSON_VALUES)
    answer = api.client.post("/v1/sessions/s-max/context", content=at_cap, headers=agent)
    assert answer.status_code in (200, 404), answer.text[:500]  # within every cap: not 413, not 422
    over = api.client.post("/v1/sessions/s-max/context", content=body(1), headers=agent)
    problem = assert_problem(over, 422)
    (error,) = problem["errors"]
    assert (error["loc"], error["type"], error["limit"]) == (
        ["body", "tools"],
        "json_too_large",
        TOOLS_VALUES,
    )


def test_a_body_of_more_json_values_than_the_limit_is_413_before_it_is_parsed(
    api: Api, parses: list[bool]
) -> None:
    agent = {**JSON, **api.headers("agent")}
    over = containers(BODY_JSON_VALUES)  # BODY_JSON_VALUES arrays and their commas
    problem = assert_problem(
        api.client.post("/v1/search", content=over, headers=agent), 413, "request_too_large"
    )
    assert str(BODY_JSON_VALUES) in problem["detail"]
    assert parses == []

    # Commas and brackets inside strings are text, not values: such a body is parsed as usual.
    text = b'{"query": "' + b"[a], {b}, " * (BODY_JSON_VALUES // 2) + b'"}'
    answer = api.client.post("/v1/search", content=text, headers=agent)
    assert answer.status_code != 413 and parses == [False]  # over 256 KiB: off the loop


def test_a_large_body_is_parsed_off_the_event_loop_and_a_small_one_on_it(
    api: Api, parses: list[bool]
) -> None:
    agent = api.headers("agent")
    small = api.client.post("/v1/search", json={"query": "dose"}, headers=agent)
    assert small.status_code == 200, small.text
    large = {"evidence_id": "big", "source": "kb", "body": "word " * (json_bodies.INLINE_PARSE_BYTES // 4)}
    stored = api.client.post("/v1/evidence", json=large, headers=agent)
    assert stored.status_code == 201, stored.text
    assert parses == [True, False]
    got = api.client.get("/v1/evidence/big", params={"content": True}, headers=agent).json()
    assert got["content"] == large["body"]
