"""The context layer: the working context an agent's model receives, under a token budget.

`tokens` counts (a real BPE tokenizer, offline), `render` writes segments, `assembler` orders
and fits them, `gather` reads one turn's material from the archive. `Mnemo.context` joins them.
"""

from .errors import ContextOverBudget
from .segments import ArchiveCandidate, AssembledContext, LeftOut, Segment
from .tokens import BpeCounter, CachedCounter, CharEstimate, TokenCounter, token_counter

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
