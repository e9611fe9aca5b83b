"""The public face: `import mnemo_sea` gives every name of `__all__`, and loads nothing heavy.

A RAG pipeline or a remote client imports the errors and `Principal` from `mnemo_sea`; paying
for the index engine, the embedding model or the tokenizer there would make every such import
cost seconds. `Mnemo` and the errors of those layers come on first use instead.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import mnemo_sea
from mnemo_sea.archive import ArchiveError
from mnemo_sea.retrieval import RetrievalError
from mnemo_sea.system.mnemo import Mnemo

HEAVY = ("torch", "sentence_transformers", "qdrant_client", "qdrant_edge", "tiktoken", "mnemo_sea.retrieval")


def test_every_public_name_resolves_to_the_layer_s_own_object() -> None:
    for name in mnemo_sea.__all__:
        assert getattr(mnemo_sea, name) is not None, name
    assert mnemo_sea.Mnemo is Mnemo
    assert mnemo_sea.RetrievalError is RetrievalError
    errors = [n for n in mnemo_sea.__all__ if n.endswith(("Error", "Conflict", "NotFound", "Rejected"))]
    for name in errors:
        cls = getattr(mnemo_sea, name)
        assert issubclass(cls, ArchiveError | RetrievalError), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        _ = mnemo_sea.NoSuchThing  # type: ignore[attr-defined]


def test_importing_the_package_loads_no_engine_model_or_tokenizer() -> None:
    code = (
        "import sys, mnemo_sea; from mnemo_sea import Principal, NotFound, Sensitivity; "
        f"print(sorted(m for m in sys.modules if m.startswith({HEAVY!r})))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert run.stdout.strip() == "[]", run.stdout
