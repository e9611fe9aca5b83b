"""What the framework retrievers share: who searches, with which filters, and what a hit becomes.

A retriever searches through a *searcher*: anything whose `search` has the signature of the
REST client's (`MnemoClient.search(query, *, limit, mode, kinds, scopes, sources, owners,
as_of, min_score)`, or
the same coroutine on `AsyncMnemoClient`), answering the facade's `SearchResult`. In process,
`InProcessSearcher(mnemo, principal)` binds a `Mnemo` and the `Principal` it searches as to that
signature. So one retriever class runs in process or against a server, and the tenant is never
a retriever's setting: it is the principal's (in process) or the API key's (remote).

A hit becomes its text (the hydrated span, `SearchHit.snippet`), a stable id
(`<evidence_id>@<version>#<start>-<end>`) and metadata: the hit's JSON form (`SearchHit.to_dict`,
the same fields REST answers) less the snippet, which is the text. That is enough to cite the
hit (`citation(metadata, quote)`) and to check the citation later (`Mnemo.check_citations`).

A search that could not run raises the library's typed error (`SearchResult.raise_for_status`:
InvalidInput, Forbidden, IndexUnavailable): a dead index is never an empty list; only an honest
`no_match` is.

Nothing here imports a framework, the index engine or the embedding model (the facade's types
are named for the type checker only), so a remote pipeline loads neither.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mnemo_sea.archive import InvalidInput, Principal
from mnemo_sea.system.citations import Citation

if TYPE_CHECKING:
    from mnemo_sea.system.mnemo import Mnemo, SearchHit, SearchResult

DEFAULT_LIMIT = 10
DEFAULT_MODE = "hybrid"

# What a model needs to cite a hit and weigh it (a summary is labelled derived); the ranking
# figures and the span stay out of prompts, where they are noise.
PROMPT_KEYS = ("evidence_id", "version", "locator", "source", "kind", "label")


# ---- searchers ------------------------------------------------------------------------------------
# The protocols type each parameter as narrowly as the retrievers pass it (a list of names, a
# positional query), so that a searcher typed any wider satisfies them: filters taken as list,
# Sequence, Collection or Iterable (the facade's type), the query under any name.


@runtime_checkable
class Searcher(Protocol):
    """A blocking search: `MnemoClient`, or `InProcessSearcher`."""

    def search(
        self,
        query: str,
        /,
        *,
        limit: int = DEFAULT_LIMIT,
        mode: str = DEFAULT_MODE,
        kinds: list[str] | None = None,
        scopes: list[str] | None = None,
        sources: list[str] | None = None,
        owners: list[str] | None = None,
        as_of: datetime | None = None,
        min_score: float | None = None,
    ) -> SearchResult: ...


@runtime_checkable
class AsyncSearcher(Protocol):
    """A search to await: `AsyncMnemoClient`."""

    async def search(
        self,
        query: str,
        /,
        *,
        limit: int = DEFAULT_LIMIT,
        mode: str = DEFAULT_MODE,
        kinds: list[str] | None = None,
        scopes: list[str] | None = None,
        sources: list[str] | None = None,
        owners: list[str] | None = None,
        as_of: datetime | None = None,
        min_score: float | None = None,
    ) -> SearchResult: ...


@dataclass(frozen=True)
class InProcessSearcher:
    """`Mnemo.search` as `principal`, with a searcher's signature. Blocking: an async retriever
    runs it in a worker thread."""

    mnemo: Mnemo
    principal: Principal

    def search(
        self,
        query: str,
        /,
        *,
        limit: int = DEFAULT_LIMIT,
        mode: str = DEFAULT_MODE,
        kinds: Iterable[str] | None = None,
        scopes: Iterable[str] | None = None,
        sources: Iterable[str] | None = None,
        owners: Iterable[str] | None = None,
        as_of: datetime | None = None,
        min_score: float | None = None,
    ) -> SearchResult:
        return self.mnemo.search(
            self.principal,
            query,
            limit=limit,
            mode=mode,
            kinds=kinds,
            scopes=scopes,
            sources=sources,
            owners=owners,
            as_of=as_of,
            min_score=min_score,
        )


def check_searcher(value: object) -> Searcher | AsyncSearcher:
    """`value` if it can search; TypeError saying what to give instead.

    A `Mnemo` itself is refused by name: it searches as a principal, which a retriever must be
    given too (`InProcessSearcher(mnemo, principal)`). The facade's module is looked up, not
    imported: if it is not loaded, `value` cannot be a Mnemo.
    """
    facade = sys.modules.get("mnemo_sea.system.mnemo")
    if facade is not None and isinstance(value, facade.Mnemo):
        raise TypeError(
            "a retriever needs a searcher, not a Mnemo: a Mnemo searches as a principal; "
            "pass InProcessSearcher(mnemo, principal)"
        )
    if not isinstance(value, Searcher | AsyncSearcher) or not callable(value.search):
        raise TypeError(
            f"a retriever needs a searcher (an object with search(query, *, limit, mode, kinds, "
            f"scopes, sources, owners, as_of, min_score), e.g. MnemoClient or InProcessSearcher), "
            f"got {type(value).__name__}"
        )
    return value


# ---- filters --------------------------------------------------------------------------------------


def _names(field: str, value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    # A string is an iterable of one-letter names to the search: sources="kb" would quietly
    # filter on "k" and "b".
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | set | frozenset):
        raise InvalidInput(field, f"must be a list of names, got {value!r}")
    names = tuple(value)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise InvalidInput(field, f"names must be strings, got {bad!r}")
    return names


@dataclass(frozen=True)
class SearchFilters:
    """The search's parameters besides the query, as the facade takes them. `kinds`, `scopes`,
    `sources`, `owners`: names (kept as tuples), None is no filter; a single string is InvalidInput. The
    values are checked by the search itself (an unknown mode or kind, a limit out of range
    answer `invalid`, raised as InvalidInput). `min_score` is the search's relevance floor, which
    the retrievers take as `score_threshold`, the name both frameworks use."""

    limit: int = DEFAULT_LIMIT
    mode: str = DEFAULT_MODE
    kinds: Sequence[str] | None = None
    scopes: Sequence[str] | None = None
    sources: Sequence[str] | None = None
    owners: Sequence[str] | None = None
    as_of: datetime | None = None
    min_score: float | None = None

    def __post_init__(self) -> None:
        for field in ("kinds", "scopes", "sources", "owners"):
            object.__setattr__(self, field, _names(field, getattr(self, field)))

    def overridden(self, overrides: Mapping[str, Any]) -> SearchFilters:
        """These filters with some replaced for one call; TypeError names an unknown one (a
        misspelt filter must not be dropped silently)."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise TypeError(
                f"unknown search parameter(s) {', '.join(unknown)}; a search takes {', '.join(sorted(known))}"
            )
        return dataclasses.replace(self, **overrides)


# ---- running a search -----------------------------------------------------------------------------


def _listed(names: Sequence[str] | None) -> list[str] | None:
    return None if names is None else list(names)


def _call(search: Any, query: str, filters: SearchFilters) -> Any:
    # `owners` only when asked: a searcher written before the filter existed still runs.
    narrowed = {} if filters.owners is None else {"owners": list(filters.owners)}
    return search(
        query,
        limit=filters.limit,
        mode=filters.mode,
        kinds=_listed(filters.kinds),
        scopes=_listed(filters.scopes),
        sources=_listed(filters.sources),
        as_of=filters.as_of,
        min_score=filters.min_score,
        **narrowed,
    )


def _hits(result: SearchResult) -> tuple[SearchHit, ...]:
    return result.raise_for_status().hits


def _async_refused(searcher: object) -> TypeError:
    return TypeError(
        f"this retriever's searcher ({type(searcher).__name__}) is async: call the retriever's "
        "async method (ainvoke, aretrieve, aquery), or give it a blocking searcher"
    )


def search_hits(
    searcher: Searcher | AsyncSearcher, query: str, filters: SearchFilters
) -> tuple[SearchHit, ...]:
    """The hits of one blocking search. Raises the search's typed error when it could not run,
    and TypeError for an async searcher (its coroutine cannot be run from a blocking call
    without a loop of its own, which its connections are not bound to)."""
    if inspect.iscoroutinefunction(searcher.search):
        raise _async_refused(searcher)
    answer = _call(searcher.search, query, filters)
    if inspect.isawaitable(answer):  # an async search not declared `async def`
        if inspect.iscoroutine(answer):
            answer.close()  # never awaited: closed, so no "never awaited" warning
        raise _async_refused(searcher)
    hits: tuple[SearchHit, ...] = _hits(answer)
    return hits


async def asearch_hits(
    searcher: Searcher | AsyncSearcher, query: str, filters: SearchFilters
) -> tuple[SearchHit, ...]:
    """The hits of one search, awaited: an async searcher natively, a blocking one (the
    in-process facade: SQL reads and the embedding model) in a worker thread, so the event loop
    never waits on it."""
    if inspect.iscoroutinefunction(searcher.search):
        answer = await _call(searcher.search, query, filters)
    else:
        answer = await asyncio.to_thread(_call, searcher.search, query, filters)
        if inspect.isawaitable(answer):
            answer = await answer
    hits: tuple[SearchHit, ...] = _hits(answer)
    return hits


# ---- what a hit becomes ---------------------------------------------------------------------------


def hit_metadata(hit: SearchHit) -> dict[str, Any]:
    """evidence_id, version, kind, source, scope, locator, score, bm25_rank, bm25_score,
    dense_rank, dense_score, relevance, span ([start, end] in the version's original text),
    label ("evidence", or "derived" for a summary), lines, byte_range and metadata (the object
    the caller kept with the version, or None): the hit's JSON form without its text."""
    metadata = hit.to_dict()
    del metadata["snippet"]
    return metadata


def hit_id(hit: SearchHit) -> str:
    """Stable for one span of one version (one search returns one hit per record)."""
    start, end = hit.span
    return f"{hit.evidence_id}@{hit.version}#{start}-{end}"


def citation(metadata: Mapping[str, Any], quote: str) -> Citation:
    """The citation of a retrieved hit, by the metadata it came with: its id, version and
    locator, quoting `quote` (the hit's text, or a part of it). Check it with
    `Mnemo.check_citations` (or the client's). InvalidInput when the metadata is not a
    mnemo-sea hit's, or the quote is empty."""
    missing = [key for key in ("evidence_id", "version", "locator") if key not in metadata]
    if missing:
        raise InvalidInput(
            "metadata", f"has no {', '.join(missing)}: not the metadata of a mnemo-sea search hit"
        )
    return Citation(
        evidence_id=metadata["evidence_id"],
        quote=quote,
        version=metadata["version"],
        locator=metadata["locator"],
    )


def framework_missing(module: str, package: str, extra: str, cause: ImportError) -> ImportError:
    """The ImportError of an integration whose framework cannot be imported."""
    return ImportError(
        f"mnemo_sea.integrations.{module} needs {package}: pip install 'mnemo-sea[{extra}]' "
        f"(importing it failed: {cause})",
        name=cause.name,
    )


__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_MODE",
    "PROMPT_KEYS",
    "AsyncSearcher",
    "InProcessSearcher",
    "SearchFilters",
    "Searcher",
    "asearch_hits",
    "check_searcher",
    "citation",
    "framework_missing",
    "hit_id",
    "hit_metadata",
    "search_hits",
]
