"""Which embedder a process uses: the one place the names `default` and `hashing` are known.

`default` is all-MiniLM-L6-v2 (the packaged model); `hashing` the deterministic word-hashing
embedder of mnemo_sea.system.wiring.hashing_embedder, for tests and offline smoke runs only. An
embedded data folder remembers what its index was built with, so a command that names no
embedder keeps that one. Light on purpose: nothing here loads the model or the index engine
until an embedder is actually built.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from mnemo_sea.archive import InvalidInput
from mnemo_sea.system.wiring.layout import INDEX_DIR

if TYPE_CHECKING:
    from mnemo_sea.retrieval import Embedder

EmbedderName = Literal["default", "hashing"]
EMBEDDERS: tuple[str, ...] = get_args(EmbedderName)


def embedder_name(name: str) -> EmbedderName:
    """`name` as one of EMBEDDERS (case and spaces ignored); InvalidInput names the choices."""
    choice = name.strip().lower()
    if choice == "default":
        return "default"
    if choice == "hashing":
        return "hashing"
    raise InvalidInput("embedder", f"{name!r} is not one of {', '.join(EMBEDDERS)}")


def folder_embedder(folder: Path) -> EmbedderName:
    """The embedder `folder`'s index was built with; `default` for a new or absent folder."""
    from mnemo_sea.retrieval.hybrid_index import IDENTITY_FILE
    from mnemo_sea.retrieval.settings import read_identity
    from mnemo_sea.system.wiring.hashing_embedder import HASHING_MODEL_ID

    stored = read_identity(folder / INDEX_DIR / IDENTITY_FILE)
    return "hashing" if stored is not None and stored.model_id == HASHING_MODEL_ID else "default"


def build_embedder(name: EmbedderName) -> Embedder | None:
    """The embedder to hand to `Mnemo`; None means the default model (loaded by the index)."""
    if name == "hashing":
        from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

        return HashingEmbedder()
    return None
