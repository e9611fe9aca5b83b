"""The REST client plugs into both retrievers as it is, for mypy (strict) too.

The retrievers are typed against the searcher protocols, not against `mnemo_sea.client`: a
client whose `search` has the agreed signature fits, whichever collection type it takes its
filters as (list, Sequence or Iterable, the facade's), blocking or async; a `Mnemo` itself (which
needs a principal) and a search that cannot take the filters do not.
"""

from __future__ import annotations

from pathlib import Path

from typecheck import flagged_lines

PROBE = """\
from collections.abc import Iterable, Sequence
from datetime import datetime
from mnemo_sea import Mnemo
from mnemo_sea.system.mnemo import SearchResult
from mnemo_sea.integrations.langchain import MnemoRetriever as LangChainRetriever
from mnemo_sea.integrations.llama_index import MnemoRetriever as LlamaIndexRetriever
class FacadeTyped:
    def search(self, query: str, *, limit: int = 10, mode: str = "hybrid", kinds: Iterable[str] | None = None,
               scopes: Iterable[str] | None = None, sources: Iterable[str] | None = None,
               owners: Iterable[str] | None = None, as_of: datetime | None = None,
               min_score: float | None = None) -> SearchResult: raise NotImplementedError
class ListTyped:
    def search(self, query: str, *, limit: int = 10, mode: str = "hybrid", kinds: list[str] | None = None,
               scopes: list[str] | None = None, sources: list[str] | None = None,
               owners: list[str] | None = None, as_of: datetime | None = None,
               min_score: float | None = None) -> SearchResult: raise NotImplementedError
class AsyncTyped:
    async def search(self, q: str, *, limit: int = 10, mode: str = "hybrid",
                     kinds: Sequence[str] | None = None, scopes: Sequence[str] | None = None,
                     sources: Sequence[str] | None = None, owners: Sequence[str] | None = None,
                     as_of: datetime | None = None,
                     min_score: float | None = None) -> SearchResult: raise NotImplementedError
class NoFilters:
    def search(self, query: str, *, limit: int = 10) -> SearchResult: raise NotImplementedError
def fits() -> None:
    for client in (FacadeTyped(), ListTyped(), AsyncTyped()):
        LangChainRetriever(searcher=client)
        LlamaIndexRetriever(client)
def does_not_fit(m: Mnemo) -> None:
    LangChainRetriever(searcher=m)
    LlamaIndexRetriever(m)
    LlamaIndexRetriever(NoFilters())
"""


def test_a_client_with_the_agreed_search_fits_both_retrievers(tmp_path: Path) -> None:
    flagged, output = flagged_lines(PROBE, tmp_path)
    assert flagged == [30, 31, 32], output
