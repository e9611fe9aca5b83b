"""Where a reference leads in the console: the page of what a summary, a memory fact, a search
hit or a task state's confirmed fact names. Refs are the archive's own forms (mnemo_sea.archive's
refs): `evidence:<id>`, `result:<session>/<rN>`, `memory:<owner>/<key>` and a summary's `sum:` id;
a bare evidence id is what a search hit of a document carries. Every part goes into the link
percent-encoded."""

from __future__ import annotations

from urllib.parse import quote, urlencode

from mnemo_sea.archive import EVIDENCE_REF_PREFIX, ConfirmedFact, MemoryIndexId, ResultIndexId, parse_index_id

SUMMARY_PREFIX = "sum:"  # the ids summaries get (archive/rules/refs.py), never an evidence id's start


def evidence_path(evidence_id: str, version: int | None = None) -> str:
    """The record's page (its versions on a time axis), or one version's."""
    if version is None:
        return f"/evidence/item?{urlencode({'id': evidence_id})}"
    return f"/evidence/version?{urlencode({'id': evidence_id, 'version': version})}"


def result_path(session_id: str, result_id: str) -> str:
    return f"/sessions/{quote(session_id, safe='')}/results/{quote(result_id, safe='')}"


def fact_path(owner: str, key: str) -> str:
    return f"/memory/fact?{urlencode({'owner': owner, 'key': key})}"


def summary_path(summary_id: str) -> str:
    return f"/summaries/item?{urlencode({'id': summary_id})}"


def ref_path(ref: str) -> str | None:
    """The page a source ref names (a summary's or a fact's `derived_from`: `evidence:<id>`,
    `result:...`, `memory:...`, `sum:...`), under the console's root; None for a ref of no form
    the console knows."""
    if ref.startswith(EVIDENCE_REF_PREFIX):
        return evidence_path(ref.removeprefix(EVIDENCE_REF_PREFIX))
    return derived_path(ref)


def derived_path(ref: str) -> str | None:
    """The page of a derived thing's id (`result:`, `memory:`, `sum:`); None for any other."""
    named = parse_index_id(ref)
    if isinstance(named, ResultIndexId):
        return result_path(named.session_id, named.result_id)
    if isinstance(named, MemoryIndexId):
        return fact_path(named.owner, named.key)
    if ref.startswith(SUMMARY_PREFIX):
        return summary_path(ref)
    return None


def ref_link(base: str, ref: str) -> str:
    """The page of what a ref names, under `base`; any text of no form the console knows is taken
    as an evidence record's id."""
    return base + (ref_path(ref) or evidence_path(ref))


def cited_link(base: str, fact: ConfirmedFact) -> str:
    """The page of the evidence a confirmed fact rests on. The archive's normalised `ref` says
    which record a citation names (`X@3` may be version 3 of X, or a record whose id holds `@`);
    a fact written before refs were kept is linked by its citation as written."""
    return ref_link(base, fact.ref if fact.ref is not None else fact.evidence_id)
