"""Curation without a script: what an agent or a harness gets when it does not decide every
archive and recovery itself.

`notes` builds an archived result's note from its content and its tool, and `instructions`
keeps every line that reads as an instruction to the model out of it. Pure functions: this
layer reads nothing and writes nothing; the facade applies them.
"""

from __future__ import annotations

from .instructions import reads_as_instruction
from .notes import NOTE_CHARS, automatic_note

__all__ = ["NOTE_CHARS", "automatic_note", "reads_as_instruction"]
