"""Answers read and checked: what an operation takes of a success, and what the client checks of
it on its own before it hands anything back.

The client believes an answer only as far as it cannot check it. Before an operation returns,

- every member it reads is there and of its type, else `MalformedAnswer` naming the member
  (`hits[2].span`): never pydantic's ValidationError, a KeyError or a TypeError;
- an original (a recovered result, an evidence body) hashes to its record's `content_sha256`,
  and to the hash the caller expects (`expected_sha256`), else `InconsistentAnswer`;
- every member that says the same thing says it alike (a recovered original's three hashes, its
  size, a context's text and its segments' texts, a check's `ok` and its leftovers);
- a search hit's snippet is as long as its span (the snippet is the text of the span);
- a status member agrees with the HTTP status (a 200 never says `forbidden` or `not_ready`);
- the record answered is the one asked for (its id, session, owner, version).

What it cannot check, and does not pretend to: an answer altered whole and consistently. Content
changed together with the hashes that name it passes every check an answer carries; only a hash
the caller had before (a `ToolResult` from `record` or `list_results`, an `EvidenceRecord` read
earlier, a citation's hash) catches it, passed as `expected_sha256`. The client keeps no such
hash itself: it remembers nothing between calls, so what it verifies is what the caller hands
it. Snippets and contexts carry no hash; a deletion receipt's signature is the server's key's
to check (`verify_deleted`). Against a server that lies, TLS to a server you trust is the remedy.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any, TypeVar

from pydantic import ValidationError

from mnemo_sea.archive import InvalidInput
from mnemo_sea.client.errors import BadAnswer, InconsistentAnswer, MalformedAnswer
from mnemo_sea.client.wire import Reply, adapter

T = TypeVar("T")

_SHA256 = re.compile(r"[0-9a-f]{64}")


def where(*path: str | int) -> str:
    """A member's path as the errors name it: `hits[2].span`, `record.version`."""
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        else:
            out += f".{step}" if out else step
    return out


def _raised(exc: BadAnswer, reply: Reply) -> BadAnswer:
    exc.request_id = reply.request_id
    return exc


def malformed(reply: Reply, path: str, problem: str) -> MalformedAnswer:
    """The MalformedAnswer to raise: `path` of `reply` is not what the operation reads."""
    exc = MalformedAnswer(reply.operation, path, problem, status=reply.status)
    _raised(exc, reply)
    return exc


def inconsistent(reply: Reply, path: str, problem: str, **detail: Any) -> InconsistentAnswer:
    """The InconsistentAnswer to raise: `path` of `reply` contradicts what the client knows."""
    exc = InconsistentAnswer(reply.operation, path, problem, status=reply.status, **detail)
    _raised(exc, reply)
    return exc


def member(reply: Reply, *path: str | int) -> Any:
    """The value at `path` of the answer's body (object members by name, list items by index)."""
    value = reply.body
    for depth, step in enumerate(path):
        here = where(*path[:depth])
        if isinstance(step, str) and not isinstance(value, dict):
            raise malformed(reply, here, f"{here or 'the body'} is not a JSON object")
        if isinstance(step, int) and not isinstance(value, list):
            raise malformed(reply, here, f"{here or 'the body'} is not a JSON list")
        try:
            value = value[step]
        except (KeyError, IndexError):
            raise malformed(reply, where(*path[: depth + 1]), "missing") from None
    return value


def an_object(reply: Reply, *path: str | int) -> dict[str, Any]:
    """The JSON object at `path` (the body itself when no path)."""
    value = member(reply, *path) if path else reply.body
    if not isinstance(value, dict):
        raise malformed(reply, where(*path), f"{where(*path) or 'the body'} is not a JSON object")
    return value


def typed(reply: Reply, kind: Any, value: Any, *path: str | int) -> Any:
    """`value` (the member at `path`) as the library's `kind`, as the server wrote it; a value
    that is not one is a MalformedAnswer naming the first member at fault."""
    try:
        return adapter(kind).validate_python(value)
    except ValidationError as e:
        errors = e.errors(include_url=False)
        first = errors[0]
        at = where(*path, *(step for step in first["loc"] if isinstance(step, str | int)))
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise malformed(reply, at, f"{first['msg']}{more}") from None


def parsed(reply: Reply, kind: type[T], *path: str | int) -> T:
    """The member at `path` as a `kind`: `parsed(reply, EvidenceRecord, "record")`."""
    value: T = typed(reply, kind, member(reply, *path) if path else reply.body, *path)
    return value


def expected_hash(value: str | None) -> str | None:
    """A caller's `expected_sha256`, lower-cased; InvalidInput (before any request) if it is not
    a SHA-256 in hex."""
    if value is None:
        return None
    normal = value.strip().lower()
    if not _SHA256.fullmatch(normal):
        raise InvalidInput("expected_sha256", "is not a SHA-256 hash (64 hexadecimal digits)")
    return normal


def expected_is(reply: Reply, sha256: str, expected: str | None, *at: str | int) -> None:
    """InconsistentAnswer unless the record's hash is the caller's `expected` one (when given)."""
    if expected is not None and sha256 != expected:
        raise inconsistent(
            reply,
            where(*at, "content_sha256"),
            f"the record names hash {sha256[:12]}…, not the expected {expected[:12]}…; nothing is returned",
            sha256=sha256,
            expected_sha256=expected,
        )


def original(reply: Reply, sha256: str, expected: str | None, *at: str | int) -> bytes:
    """The original an answer carries (`content` as text or `content_base64`, under `at`),
    returned only when it hashes to `sha256`, the hash its record names, and that hash is the
    caller's `expected` one (when given): a proxy that cut or rewrote the body, or a server bug,
    must not hand back other bytes as the exact original."""
    expected_is(reply, sha256, expected, *at)
    content = carried(reply, *at)
    actual = hashlib.sha256(content).hexdigest()
    if actual != sha256:
        raise inconsistent(
            reply,
            where(*at, "content"),
            f"the original hashes to {actual[:12]}…, not its record's {sha256[:12]}…; it is not returned",
            sha256=sha256,
            actual_sha256=actual,
        )
    return content


def carried(reply: Reply, *at: str | int) -> bytes:
    """The bytes an answer carries under `at` (`content` as text or `content_base64`), unchecked:
    the caller checks them against what they must be (a hash, an excerpt's size)."""
    body = an_object(reply, *at)
    text, encoded = body.get("content"), body.get("content_base64")
    if isinstance(text, str):
        return text.encode("utf-8")
    if isinstance(encoded, str):
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise malformed(reply, where(*at, "content_base64"), "is not base64") from None
    if text is None and encoded is None:
        raise malformed(reply, where(*at, "content"), "no content: neither content nor content_base64")
    raise malformed(reply, where(*at, "content"), "content is not a string")


def same(reply: Reply, path: str, answered: Any, known: Any, what: str) -> None:
    """InconsistentAnswer unless the answer's `answered` (at `path`) is the `known` value: the
    one asked for, or one another member of the same answer already gave."""
    if answered != known:
        raise inconsistent(reply, path, f"{what} is {answered!r}, not {known!r}")


__all__ = [
    "an_object",
    "expected_hash",
    "inconsistent",
    "malformed",
    "member",
    "original",
    "parsed",
    "same",
    "typed",
    "where",
]
