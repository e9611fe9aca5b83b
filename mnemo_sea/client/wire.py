"""What travels between the client and the REST API: a request as an operation describes it,
an answer as the operation reads it, and the JSON in between.

A `Request` says whether it may be sent again (`retry`): a read may, and so may a write under an
idempotency key, which the server answers once and replays after (the archive stores the reply
in the write's own transaction). A write the server cannot make idempotent is never retried.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

PROBLEM_JSON = "application/problem+json"


def new_id() -> str:
    """A request id or idempotency key: 32 hex digits, a valid identifier for the server."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Request:
    """One HTTP request of an operation. `path` is percent-encoded already (`segment`)."""

    method: str
    path: str
    params: Mapping[str, Any] | None = None
    body: Any = None  # JSON-ready; None sends no body
    # Sent as Idempotency-Key: the server writes once and replays its first answer after.
    idempotency_key: str | None = None
    # May be sent again after a 503 with Retry-After or a lost connection (see the module doc).
    retry: bool = True
    # Problem codes the operation reads itself instead of raising (`current`'s missing fact).
    passthrough: frozenset[str] = frozenset()
    # Sent as X-Request-ID (the server echoes it, logs it and puts it in problems); one id for
    # every attempt, so the server's log shows the retries of one call under one id.
    request_id: str = field(default_factory=new_id)
    # The client's method that made it (set by calls.operation): what a BadAnswer names.
    operation: str = ""

    def headers(self) -> dict[str, str]:
        headers = {"X-Request-ID": self.request_id}
        if self.idempotency_key is not None:
            headers["Idempotency-Key"] = self.idempotency_key
        return headers


def read(method: str, path: str, **kwargs: Any) -> Request:
    """A request that changes nothing: always safe to send again."""
    return Request(method, path, retry=True, **kwargs)


def keyed_write(method: str, path: str, idempotency_key: str | None, **kwargs: Any) -> Request:
    """A write under an idempotency key (the caller's, or a new one for this call): safe to send
    again, since the server replays the first answer instead of writing twice."""
    key = new_id() if idempotency_key is None else idempotency_key
    return Request(method, path, idempotency_key=key, retry=True, **kwargs)


def unkeyed_write(method: str, path: str, **kwargs: Any) -> Request:
    """A write the server takes no idempotency key for: sent once, never retried."""
    return Request(method, path, retry=False, **kwargs)


@dataclass(frozen=True)
class Reply:
    """An answer as the operations read it: the status, the JSON body (None when empty or not
    JSON, `text` then holds it; `json` tells a JSON `null` from no JSON at all), whether it was
    served as a problem (`problem_json`), the request id the server gave, and the operation
    that asked (`operation`, what a BadAnswer names)."""

    status: int
    body: Any
    text: str
    request_id: str | None
    retry_after: str | None
    json: bool = False
    problem_json: bool = False
    operation: str = ""

    @classmethod
    def of(cls, response: httpx.Response, operation: str = "") -> Reply:
        body: Any = None
        is_json = False
        content_type = response.headers.get("content-type", "")
        if response.content and "json" in content_type:
            try:
                body = response.json()
                is_json = True
            except ValueError:
                body = None
        return cls(
            status=response.status_code,
            body=body,
            text="" if is_json else response.text,
            request_id=response.headers.get("x-request-id"),
            retry_after=response.headers.get("retry-after"),
            json=is_json,
            problem_json=content_type.split(";", 1)[0].strip().lower() == PROBLEM_JSON,
            operation=operation,
        )

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def problem_code(self) -> str | None:
        """The `code` of a problem+json answer; None for a success or an answer that is not one."""
        if self.ok or not isinstance(self.body, dict):
            return None
        code = self.body.get("code")
        return code if isinstance(code, str) else None


def segment(value: str) -> str:
    """`value` as one path segment: every reserved character percent-encoded, and `.` and `..`
    written %2E / %2E%2E, so that no client or proxy resolves them (the API's own advice)."""
    if value in (".", ".."):
        return "%2E" * len(value)
    return quote(value, safe="")


def jsonable(value: Any) -> Any:
    """A value as JSON data: datetimes in ISO 8601, dataclasses as objects, tuples as lists."""
    return to_jsonable_python(value)


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def adapter(kind: Any) -> TypeAdapter[Any]:
    """The pydantic adapter of `kind` (a record dataclass, a tuple of them, ...)."""
    # Built once per type (a schema build costs milliseconds); a race only builds one twice.
    adapter = _ADAPTERS.get(kind)
    if adapter is None:
        adapter = _ADAPTERS[kind] = TypeAdapter(kind)
    return adapter


def dumped(kind: type[Any], value: Any) -> Any:
    """A record as the JSON its schema publishes (a sensitivity by name, for one)."""
    return adapter(kind).dump_python(value, mode="json")
