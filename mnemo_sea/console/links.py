"""Where a reference a record holds leads in the console: a task state's confirmed fact cites an
evidence record, a tool result or a memory fact, and its page shows that citation as a link to
the page of what it cites. Every id goes into the link percent-encoded: evidence ids may hold
`/`, `#`, `?` and spaces."""

from __future__ import annotations

from urllib.parse import quote, urlencode

from mnemo_sea.archive import (
    EVIDENCE_REF_PREFIX,
    ConfirmedFact,
    MemoryIndexId,
    ResultIndexId,
    parse_index_id,
)


def _q(value: str) -> str:
    return quote(value, safe="")


def _query(**params: str) -> str:
    return urlencode(params, quote_via=quote)


def ref_link(base: str, ref: str) -> str:
    """The page of what a normalised ref names: `evidence:<id>`, `result:<session>/<rN>` or
    `memory:<owner>/<key>`; any other text is taken as an evidence record's id."""
    named = parse_index_id(ref)
    if isinstance(named, ResultIndexId):
        return f"{base}/sessions/{_q(named.session_id)}/results/{_q(named.result_id)}"
    if isinstance(named, MemoryIndexId):
        return f"{base}/memory/fact?{_query(owner=named.owner, key=named.key)}"
    return f"{base}/evidence/item?{_query(id=ref.removeprefix(EVIDENCE_REF_PREFIX))}"


def cited_link(base: str, fact: ConfirmedFact) -> str:
    """The page of the evidence a confirmed fact rests on. The archive's normalised `ref` says
    which record a citation names (`X@3` may be version 3 of X, or a record whose id holds `@`);
    a fact written before refs were kept is linked by its citation as written."""
    return ref_link(base, fact.ref if fact.ref is not None else fact.evidence_id)
