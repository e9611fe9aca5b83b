"""Hits as the index answers them (`retrieval.Hit`), for tests that hand them to the archive's
`read_hits` directly: the archive reads a hit through its `PointsToHit` fields, whoever made it."""

from __future__ import annotations

import uuid

from mnemo_sea.retrieval.outcome import Hit


def index_hit(
    evidence_id: str, version: int, kind: str, start: int, end: int, content_sha256: str = ""
) -> Hit:
    """The index's hit on `evidence_id`@`version`, span [start, end): the fields the archive
    reads as given; the rest (point, tenant, scope, score...) as a search would fill them, and
    never read by hydration."""
    return Hit(
        point_id=uuid.uuid5(uuid.NAMESPACE_URL, f"{evidence_id}@{version}/{start}"),
        tenant_id="",
        evidence_id=evidence_id,
        version=version,
        chunk=0,
        start=start,
        end=end,
        content_sha256=content_sha256,
        kind=kind,
        scope="",
        source="test",
        owner=None,
        sensitivity=0,
        status="active",
        score=1.0,
    )
