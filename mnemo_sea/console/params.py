"""What the pages of the audit, deletion, task state and curation routes take: who is looking,
an offset into a long list, a seq to page an audit list down from, and the facade they read
through (as that principal, never past it)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request

from mnemo_sea.archive import Principal
from mnemo_sea.console.viewer import viewer
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.receipt_json import MAX_SQL_INT

Viewer = Annotated[Principal, Depends(viewer)]
Offset = Annotated[int | None, Query(ge=0, le=10_000_000)]
# The seq an audit page lists down from (keyset paging: the last seq the page before showed).
BeforeSeq = Annotated[int | None, Query(ge=1, le=MAX_SQL_INT)]


def mnemo_of(request: Request) -> Mnemo:
    mnemo: Mnemo = request.app.state.mnemo
    return mnemo
