"""Content-addressed originals, per tenant. Every read re-checks the hash."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, exists, select

from ..rules.clock import utcnow
from ..rules.errors import IntegrityFailure
from . import schema as t
from .upserts import insert_or_touch


def sha256_hex(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def put_blob(conn: Connection, tenant_id: str, content: bytes, media_type: str) -> str:
    """Store `content` once per tenant (idempotent); returns its sha256."""
    return put_blobs(conn, tenant_id, [(content, media_type)])[0]


_BLOB_COLUMNS = ("tenant_id", "sha256", "size", "media_type", "content", "created_at")


def put_blobs(
    conn: Connection,
    tenant_id: str,
    originals: Iterable[tuple[bytes, str]],
    digests: Sequence[str] | None = None,
) -> list[str]:
    """`put_blob` for many (content, media type) pairs in one statement; their sha256s, in order
    (`digests`: those the caller computed already, one per original, which `originals` may then
    yield as it goes rather than hold).

    Content stored twice keeps the first media type, as consecutive `put_blob` calls would.
    Rows are written in digest order, so two writers touching the same blobs lock them in the
    same order (PostgreSQL row locks) and never deadlock.
    """
    if digests is None:
        originals = list(originals)
        digests = [sha256_hex(content) for content, _ in originals]
    now = utcnow()
    rows: dict[str, tuple[Any, ...]] = {}  # by digest, the values of _BLOB_COLUMNS
    for digest, (content, media_type) in zip(digests, originals, strict=True):
        rows.setdefault(digest, (tenant_id, digest, len(content), media_type, content, now))
    insert_or_touch(
        conn, t.blobs, _BLOB_COLUMNS, [rows[d] for d in sorted(rows)], ["tenant_id", "sha256"], touch="size"
    )
    return list(digests)


def read_blob(conn: Connection, tenant_id: str, digest: str) -> bytes:
    """Return the original bytes; raises IntegrityFailure if they no longer match their hash."""
    row = conn.execute(_READ_BLOB, {"tenant_id": tenant_id, "sha256": digest}).first()
    return verified(digest, None if row is None else row.content)


# Built once: the indexer's trail and search's pages read an original per call (see
# outbox._claim_statement for what building a statement per call costs).
_READ_BLOB = select(t.blobs.c.content).where(
    t.blobs.c.tenant_id == bindparam("tenant_id"), t.blobs.c.sha256 == bindparam("sha256")
)


def read_blobs(conn: Connection, tenant_id: str, digests: Iterable[str]) -> dict[str, bytes]:
    """`read_blob` of many originals in one statement: each digest's bytes, every one checked
    against its hash (IntegrityFailure for the first that fails or is missing)."""
    wanted = sorted(set(digests))
    stored: dict[str, bytes] = {}
    # In parts: a statement's parameters are bounded (SQLite's 32,766, PostgreSQL's 65,535), and
    # a session's originals may be more.
    for start in range(0, len(wanted), _DIGESTS_PER_READ):
        part = wanted[start : start + _DIGESTS_PER_READ]
        rows = conn.execute(
            select(t.blobs.c.sha256, t.blobs.c.content).where(
                t.blobs.c.tenant_id == tenant_id, t.blobs.c.sha256.in_(part)
            )
        )
        stored.update((row.sha256, row.content) for row in rows)
    return {digest: verified(digest, stored.get(digest)) for digest in wanted}


_DIGESTS_PER_READ = 1000


def verified(digest: str, stored: bytes | None) -> bytes:
    """`stored` (the blob column as read, None when the row is missing) if it hashes to `digest`;
    IntegrityFailure otherwise. For reads that fetch the column themselves (batched reads)."""
    if stored is None:
        raise IntegrityFailure(f"original {digest[:12]}… is missing from the blob store", sha256=digest)
    content = bytes(stored)
    actual = sha256_hex(content)
    if actual != digest:
        raise IntegrityFailure(
            f"original {digest[:12]}… fails its hash check (stored bytes hash to {actual[:12]}…); "
            "it is not served",
            sha256=digest,
            actual_sha256=actual,
        )
    return content


def delete_unreferenced(conn: Connection, tenant_id: str, digests: set[str]) -> list[str]:
    """Delete those of `digests` that no tool result or evidence version references any more."""
    if not digests:
        return []
    referenced_by_result = exists().where(
        and_(t.tool_results.c.tenant_id == tenant_id, t.tool_results.c.blob_sha256 == t.blobs.c.sha256)
    )
    referenced_by_evidence = exists().where(
        and_(t.evidence.c.tenant_id == tenant_id, t.evidence.c.blob_sha256 == t.blobs.c.sha256)
    )
    condition = and_(
        t.blobs.c.tenant_id == tenant_id,
        t.blobs.c.sha256.in_(sorted(digests)),
        ~referenced_by_result,
        ~referenced_by_evidence,
    )
    doomed = [r.sha256 for r in conn.execute(select(t.blobs.c.sha256).where(condition))]
    if doomed:
        conn.execute(delete(t.blobs).where(t.blobs.c.tenant_id == tenant_id, t.blobs.c.sha256.in_(doomed)))
    return sorted(doomed)
