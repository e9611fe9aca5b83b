"""The context layer: the working context an agent's model receives, under a token budget.

`tokens` counts (a real BPE tokenizer, offline), `render` writes segments, `assembler` orders
and fits them, `gather` reads one turn's material from the archive. `Mnemo.context` joins them.

The counters are loaded on first use: the tokenizer's import is paid by the processes that
count, not by one that only reads an assembled context's types (the REST client).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import ContextOverBudget
from .segments import ArchiveCandidate, AssembledContext, LeftOut, Segment

if TYPE_CHECKING:
    from .tokens import BpeCounter, CachedCounter, CharEstimate, TokenCounter, token_counter

_LAZY = dict.fromkeys(
    ("BpeCounter", "CachedCounter", "CharEstimate", "TokenCounter", "token_counter"), "tokens"
)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ArchiveCandidate",
    "AssembledContext",
    "BpeCounter",
    "CachedCounter",
    "CharEstimate",
    "ContextOverBudget",
    "LeftOut",
    "Segment",
    "TokenCounter",
    "token_counter",
]
