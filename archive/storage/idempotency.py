"""Idempotency keys: a retried write returns the first call's answer and writes nothing again.

The contract every write with an `idempotency_key` keeps:
- keys are per principal (tenant and subject): one caller's key never answers, or reveals, another
  caller's request; a key names one request: its operation plus a sha256 over a canonical
  JSON of every argument that shapes the write (bytes enter as their sha256);
- the same key, operation and request replays the stored reply; the same key for another
  operation or another request raises IdempotencyMismatch and writes nothing;
- `previous_reply` is the first statement of the write's transaction and `save_reply` inserts
  the reply in that same transaction, so a crash leaves both the write and its key or neither,
  and a concurrent call with the key waits for the first (SQLite: the write lock taken by
  `store.write()`; PostgreSQL: an advisory lock on the key) and then replays;
- replies hold identifiers and states, never content: deleting a record must not leave its
  text behind in this table, so callers re-read the domain object by its ids.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select, text

from ..rules.clock import utcnow
from ..rules.errors import IdempotencyMismatch
from ..rules.principal import Principal, check_identifier
from . import schema as t


@dataclass(frozen=True)
class KeyedRequest:
    """One write under an idempotency key: the caller's key, the operation, its request hash."""

    tenant_id: str
    key: str  # as the caller gave it
    operation: str
    request_sha256: str
    subject: str = ""

    @property
    def stored_key(self) -> str:
        # The subject, hashed so that subject (128) and key (128) fit the 255-character column.
        return f"{hashlib.sha256(self.subject.encode('utf-8')).hexdigest()[:16]}:{self.key}"


def _plain(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} has no canonical form in an idempotent request")


def request_sha256(request: object) -> str:
    """The sha256 of a canonical JSON of `request` (sorted keys; datetimes as ISO 8601)."""
    canonical = json.dumps(request, ensure_ascii=False, sort_keys=True, default=_plain)
    # surrogatepass: text with a lone surrogate must reach the caller's validation (which
    # rejects it with a field-level error) instead of failing here; valid text encodes as UTF-8.
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def keyed(principal: Principal, key: str | None, operation: str, request: object) -> KeyedRequest | None:
    """Validate `key` and hash `request`; None when the caller gave no key.

    Raises InvalidInput (field idempotency_key) for a key that is not an identifier.
    """
    if key is None:
        return None
    check_identifier("idempotency_key", key)
    return KeyedRequest(principal.tenant_id, key, operation, request_sha256(request), principal.subject)


def previous_reply(conn: Connection, request: KeyedRequest | None) -> dict[str, Any] | None:
    """The stored reply of an earlier call with this key, or None (always None without a key).

    Raises IdempotencyMismatch when the key was used for another operation or request.
    """
    if request is None:
        return None
    if conn.dialect.name == "postgresql":
        # FOR UPDATE locks nothing while the key row does not exist yet, so two calls with one
        # key could both miss it; this lock serialises them (SQLite already serialises writers).
        conn.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
            {"k": f"{request.tenant_id}\x1f{request.stored_key}"},
        )
    row = conn.execute(
        select(t.idempotency_keys).where(
            t.idempotency_keys.c.tenant_id == request.tenant_id,
            t.idempotency_keys.c.key == request.stored_key,
        )
    ).first()
    if row is None:
        return None
    if row.operation != request.operation or row.request_sha256 != request.request_sha256:
        raise IdempotencyMismatch(request.key)
    reply: dict[str, Any] = json.loads(row.response_json)
    return reply


def save_reply(conn: Connection, request: KeyedRequest | None, reply: Mapping[str, Any]) -> None:
    """Store the reply a retry will get, in the write's own transaction (no-op without a key)."""
    if request is None:
        return
    conn.execute(
        t.idempotency_keys.insert().values(
            tenant_id=request.tenant_id,
            key=request.stored_key,
            operation=request.operation,
            request_sha256=request.request_sha256,
            response_json=json.dumps(dict(reply), ensure_ascii=False, sort_keys=True, default=_plain),
            created_at=utcnow(),
        )
    )
