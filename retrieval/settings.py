"""Settings of an index, split by when they bind.

EncodingSettings shape the stored vectors (tokenizer, BM25 document weights, chunking). They
are written beside an embedded index when it is created and checked on every open: mixing
encodings in one index would silently skew rankings, so a mismatch is an error.

SearchSettings only shape queries (fusion, candidate depth, IDF population) and may differ
from one open, or one query, to the next.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .bm25 import Bm25Params
from .chunking import ChunkingPolicy
from .errors import IndexConfigMismatch, IndexUnavailable
from .fusion import FusionSettings
from .tokenizer import ChineseSegmentation, TokenizerSettings, mostly_han

FORMAT = 1


@dataclass(frozen=True)
class EncodingSettings:
    tokenizer: TokenizerSettings = field(default_factory=TokenizerSettings)
    bm25: Bm25Params = field(default_factory=lambda: Bm25Params(k1=0.9, b=0.4))
    chunking: ChunkingPolicy = field(default_factory=ChunkingPolicy)


def _han_fusion() -> FusionSettings:
    return FusionSettings(k=10.0, bm25_weight=8.0, dense_weight=1.0)


@dataclass(frozen=True)
class SearchSettings:
    """`fusion`: RRF settings for queries (k=60 and equal weights, the literature's default).

    `fusion_han`: RRF settings for queries written mostly in Han characters, or None to use
    `fusion` for every query. The default model, all-MiniLM-L6-v2, was trained on English only:
    on the KUAKE-QTR train split its dense leg reaches nDCG@10 0.19 against BM25's 0.85, so for
    Chinese queries the dense leg only breaks BM25's ties (k=10, weights 8:1, the best point of
    the sweep in eval/README.md). Set None when the model is multilingual.

    `candidates`: how deep each leg looks before fusion (at least the query's limit).

    `tenant_idf`: compute BM25 IDF over the caller's tenant only, so one tenant's writes never
    change another tenant's scores (which would leak, through scores, what others store).
    """

    fusion: FusionSettings = field(default_factory=FusionSettings)
    fusion_han: FusionSettings | None = field(default_factory=_han_fusion)
    candidates: int = 100
    tenant_idf: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.candidates <= 10_000:
            raise ValueError(f"candidates must be in [1, 10000], got {self.candidates}")

    def fusion_for(self, text: str) -> FusionSettings:
        """The fusion settings for a query text (see `fusion_han`)."""
        if self.fusion_han is not None and mostly_han(text):
            return self.fusion_han
        return self.fusion


@dataclass(frozen=True)
class IndexIdentity:
    """What an index's stored vectors were made with."""

    model_id: str
    dense_dimension: int
    encoding: EncodingSettings

    def to_json(self) -> dict[str, Any]:
        t, b, c = self.encoding.tokenizer, self.encoding.bm25, self.encoding.chunking
        return {
            "format": FORMAT,
            "model_id": self.model_id,
            "dense_dimension": self.dense_dimension,
            "tokenizer": {
                "english_stopwords": sorted(t.english_stopwords),
                "chinese_stopwords": sorted(t.chinese_stopwords),
                "stem_english": t.stem_english,
                "chinese": t.chinese.value,
                "identifiers": t.identifiers,
            },
            "bm25": {"k1": b.k1, "b": b.b, "avg_doc_len": b.avg_doc_len},
            "chunking": {
                "max_chars": c.max_chars,
                "overlap_chars": c.overlap_chars,
                "han_char_cost": c.han_char_cost,
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IndexIdentity:
        t, b, c = data["tokenizer"], data["bm25"], data["chunking"]
        return cls(
            model_id=str(data["model_id"]),
            dense_dimension=int(data["dense_dimension"]),
            encoding=EncodingSettings(
                tokenizer=TokenizerSettings(
                    english_stopwords=frozenset(t["english_stopwords"]),
                    chinese_stopwords=frozenset(t["chinese_stopwords"]),
                    stem_english=bool(t["stem_english"]),
                    chinese=ChineseSegmentation(t["chinese"]),
                    identifiers=bool(t["identifiers"]),
                ),
                bm25=Bm25Params(k1=float(b["k1"]), b=float(b["b"]), avg_doc_len=float(b["avg_doc_len"])),
                chunking=ChunkingPolicy(
                    max_chars=int(c["max_chars"]),
                    overlap_chars=int(c["overlap_chars"]),
                    han_char_cost=int(c["han_char_cost"]),
                ),
            ),
        )

    def check_same(self, other: IndexIdentity, where: str) -> None:
        """Raise IndexConfigMismatch naming the first field in which `other` differs."""
        mine, theirs = _flatten(self.to_json()), _flatten(other.to_json())
        for key in mine:
            if mine[key] != theirs.get(key):
                raise IndexConfigMismatch(where, key, mine[key], theirs.get(key))


def read_identity(path: Path) -> IndexIdentity | None:
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            raise IndexUnavailable(str(path), f"unknown index format {data.get('format')!r}")
        return IndexIdentity.from_json(data)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise IndexUnavailable(str(path), f"unreadable index settings: {exc}") from exc


def write_identity(path: Path, identity: IndexIdentity) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(identity.to_json(), indent=2, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)  # atomic: a crash leaves the old file or the new one, never half of one


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
