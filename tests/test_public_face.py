"""The public face: `import mnemo_sea` gives every name of `__all__`, and loads nothing heavy.

A RAG pipeline or a remote client imports the errors and `Principal` from `mnemo_sea`; paying
for the index engine, the embedding model or the tokenizer there would make every such import
cost seconds. `Mnemo` and the errors of those layers come on first use instead.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typecheck import flagged_lines

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
    errors = [
        n for n in mnemo_sea.__all__ if n.endswith(("Error", "Failure", "Conflict", "NotFound", "Rejected"))
    ]
    for name in errors:
        cls = getattr(mnemo_sea, name)
        assert issubclass(cls, ArchiveError | RetrievalError), name


def test_the_old_name_of_integrity_failure_resolves_with_a_deprecation_warning() -> None:
    """IntegrityError (the name of SQLAlchemy's and sqlite3's constraint error) was renamed
    IntegrityFailure; code that imports the old name keeps working and is told so."""
    from mnemo_sea import archive

    for module in (mnemo_sea, archive):
        with pytest.warns(DeprecationWarning, match="renamed IntegrityFailure"):
            assert module.IntegrityError is mnemo_sea.IntegrityFailure
    assert "IntegrityError" not in mnemo_sea.__all__ and "IntegrityError" not in archive.__all__


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


def test_the_facade_is_typed_for_its_callers(tmp_path: Path) -> None:
    """mypy (strict) sees the records' types through `Mnemo`: a wrong content type, an unknown
    provenance, a misspelt keyword are rejected before anything runs; the right call passes."""
    flagged, output = flagged_lines(
        "from mnemo_sea import Mnemo, Principal\n"
        "def ok(m: Mnemo, p: Principal) -> None:\n"
        "    m.record(p, 's', 'tool', 'text', policy_class='stock')\n"
        "    m.remember(p, 'o', 'k', 'v', 'user_claim', ttl_seconds=60.0)\n"
        "def wrong(m: Mnemo, p: Principal) -> None:\n"
        "    m.record(p, 's', 'tool', 42)\n"
        "    m.remember(p, 'o', 'k', 'v', 'gossip')\n"
        "    m.archive_results(p, 's', [('r1', 'note')], idempotency='x')\n",
        tmp_path,
    )
    assert flagged == [6, 7, 8], output
