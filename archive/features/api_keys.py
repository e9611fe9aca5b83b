"""API keys: how a network caller becomes a principal.

A key reads `msk_<key_id>_<secret>`. The archive database keeps the key id, the principal it
maps to (tenant, subject, roles, clearance) and a SHA-256 of the secret, never the secret:
the secret is 256 random bits, so a plain hash cannot be brute-forced and a leaked table
lets no one in. The tenant of every request comes from the key alone.

Creating and revoking a key are audited in the key's tenant, in the transaction that writes
the key row, with `actor` as the event's actor (the CLI passes `operator`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, bindparam, select, update

from ..rules.clock import utcnow
from ..rules.errors import InvalidInput, NotFound, StateConflict
from ..rules.errors import Unauthenticated as Unauthenticated  # noqa: PLC0414 - re-exported: its import path before errors.py
from ..rules.principal import Principal, Role, Sensitivity
from ..storage import schema as t
from ..storage.audit import append_event
from ..storage.store import ArchiveStore
from ..storage.verified_keys import VerifiedKeys, forget_everywhere

KEY_PREFIX = "msk"
MAX_NAME_CHARS = 200
OPERATOR = "operator"  # the audit actor of key management run with direct access to the archive


@dataclass(frozen=True)
class ApiKeyInfo:
    """A key as listed: everything but the secret."""

    key_id: str
    name: str
    tenant_id: str
    subject: str
    roles: tuple[str, ...]
    clearance: int
    created_at: datetime
    revoked_at: datetime | None

    @property
    def principal(self) -> Principal:
        return Principal(
            self.tenant_id, self.subject, frozenset(Role(r) for r in self.roles), Sensitivity(self.clearance)
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "key_id": self.key_id,
            "name": self.name,
            "tenant_id": self.tenant_id,
            "subject": self.subject,
            "roles": list(self.roles),
            "clearance": Sensitivity(self.clearance).name.lower(),
            "created_at": self.created_at.isoformat(),
            "revoked_at": None if self.revoked_at is None else self.revoked_at.isoformat(),
        }


# ---- the rows: each write audited in its own transaction ------------------------------------------


def _detail(row: Any) -> dict[str, Any]:
    # Who the key acts as, never its secret hash.
    return {
        "subject": row["subject"],
        "roles": row["roles"],
        "clearance": row["clearance"],
        "name": row["name"],
    }


def _insert_row(store: ArchiveStore, values: dict[str, Any], *, actor: str) -> None:
    """Store a key row (already validated) and audit it in the key's tenant, in one transaction."""
    with store.write() as conn:
        conn.execute(t.api_keys.insert().values(**values))
        append_event(
            conn, values["tenant_id"], actor, "api_key_create", f"api_key:{values['key_id']}", _detail(values)
        )


def _revoke_row(store: ArchiveStore, key_id: str, *, actor: str) -> tuple[Row[Any], datetime]:
    """Revoke a key row and audit it; returns the row as it was and the revocation time.

    Raises NotFound for an unknown id, StateConflict if it is already revoked.
    """
    with store.write() as conn:
        row = conn.execute(select(t.api_keys).where(t.api_keys.c.key_id == key_id)).first()
        if row is None:
            raise NotFound("api key", key_id)
        if row.revoked_at is not None:
            raise StateConflict(f"api key {key_id!r} is already revoked", key_id=key_id)
        now = utcnow()
        conn.execute(update(t.api_keys).where(t.api_keys.c.key_id == key_id).values(revoked_at=now))
        append_event(conn, row.tenant_id, actor, "api_key_revoke", f"api_key:{key_id}", _detail(row._mapping))
    return row, now


# ---- minting, listing, revoking, checking ----------------------------------------------------------


def _secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _info(row: object) -> ApiKeyInfo:
    r = row._mapping  # type: ignore[attr-defined]
    return ApiKeyInfo(
        key_id=r["key_id"],
        name=r["name"],
        tenant_id=r["tenant_id"],
        subject=r["subject"],
        roles=tuple(r["roles"].split(",")),
        clearance=int(r["clearance"]),
        created_at=r["created_at"],
        revoked_at=r["revoked_at"],
    )


def create_key(
    store: ArchiveStore,
    *,
    tenant_id: str,
    subject: str,
    roles: Iterable[Role | str],
    clearance: Sensitivity | str | int = Sensitivity.INTERNAL,
    name: str = "",
    actor: str = OPERATOR,
) -> tuple[str, ApiKeyInfo]:
    """Create a key for this principal; returns the key (shown once) and what is stored.

    Raises InvalidInput for a bad tenant, subject, role, clearance or name.
    """
    try:
        role_set = frozenset(Role(r) for r in roles)
    except ValueError:
        raise InvalidInput("roles", f"each role is one of {', '.join(r.value for r in Role)}") from None
    if not role_set:
        raise InvalidInput("roles", "a key needs at least one role")
    principal = Principal(tenant_id, subject, role_set, Sensitivity.parse(clearance))  # validates ids
    if len(name) > MAX_NAME_CHARS or any(ord(c) < 32 for c in name):
        raise InvalidInput("name", f"at most {MAX_NAME_CHARS} printable characters")
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    info = ApiKeyInfo(
        key_id=key_id,
        name=name,
        tenant_id=principal.tenant_id,
        subject=principal.subject,
        roles=tuple(sorted(r.value for r in principal.roles)),
        clearance=int(principal.clearance),
        created_at=utcnow(),
        revoked_at=None,
    )
    _insert_row(
        store,
        {
            "key_id": info.key_id,
            "tenant_id": info.tenant_id,
            "subject": info.subject,
            "roles": ",".join(info.roles),
            "clearance": info.clearance,
            "name": info.name,
            "secret_sha256": _secret_hash(secret),
            "created_at": info.created_at,
            "revoked_at": None,
        },
        actor=actor,
    )
    return f"{KEY_PREFIX}_{key_id}_{secret}", info


def list_keys(store: ArchiveStore, tenant_id: str | None = None) -> list[ApiKeyInfo]:
    """Every key (of one tenant when given), oldest first, revoked ones included."""
    stmt = select(t.api_keys).order_by(t.api_keys.c.created_at, t.api_keys.c.key_id)
    if tenant_id is not None:
        stmt = stmt.where(t.api_keys.c.tenant_id == tenant_id)
    with store.read() as conn:
        return [_info(row) for row in conn.execute(stmt)]


def revoke_key(store: ArchiveStore, key_id: str, *, actor: str = OPERATOR) -> ApiKeyInfo:
    """Revoke a key at once. Raises NotFound for an unknown id, StateConflict if already revoked.

    Every verified-key cache of this process forgets it at once; a process elsewhere that
    caches verified keys refuses it within its cache's bound (see verified_keys.py)."""
    row, now = _revoke_row(store, key_id, actor=actor)
    forget_everywhere(key_id)
    info = _info(row)
    return ApiKeyInfo(**{**info.__dict__, "revoked_at": now})


def parse_key(presented: str) -> tuple[str, str]:
    """`msk_<id>_<secret>` -> (id, secret). Raises Unauthenticated for anything else."""
    prefix, _, rest = presented.strip().partition("_")
    key_id, _, secret = rest.partition("_")
    if prefix != KEY_PREFIX or not key_id or not secret or len(key_id) > 32:
        raise Unauthenticated("malformed API key: keys look like msk_<id>_<secret>")
    return key_id, secret


# Built once: the lookup runs on every request that no cache answers.
_KEY_ROW = select(t.api_keys).where(t.api_keys.c.key_id == bindparam("key_id"))


def cached_principal(presented: str, cache: VerifiedKeys) -> Principal | None:
    """The principal of a key `cache` verified within its bound, or None (then `authenticate`).
    Raises Unauthenticated for a malformed key. Reads nothing, so it may run on an event loop."""
    key_id, secret = parse_key(presented)
    return cache.get(key_id, _secret_hash(secret))


def authenticate(store: ArchiveStore, presented: str, *, cache: VerifiedKeys | None = None) -> Principal:
    """The principal a key maps to. Raises Unauthenticated (never saying whether the id exists).

    With `cache`, a key it verified within its bound is not read again, and a key the
    database accepts is added to it (see verified_keys.py for what that promises)."""
    key_id, secret = parse_key(presented)
    digest = _secret_hash(secret)
    check = None
    if cache is not None:
        known = cache.get(key_id, digest)
        if known is not None:
            return known
        check = cache.begin()
    with store.read() as conn:
        row = conn.execute(_KEY_ROW, {"key_id": key_id}).first()
    # Compare even for an unknown id, so timing does not tell which ids exist.
    stored = row.secret_sha256 if row is not None else "0" * 64
    matches = hmac.compare_digest(stored, digest)
    if row is None or not matches or row.revoked_at is not None:
        raise Unauthenticated("unknown or revoked API key")
    principal = _info(row).principal
    if cache is not None and check is not None:
        cache.put(key_id, digest, principal, check)
    return principal
