"""What a key-value store's item is in the archive: a memory fact, its owner a namespace.

A LangGraph namespace (a tuple of labels) becomes a memory owner, reversibly:

    ("users", "u-42", "prefs")   ->   lg:users:u-42:prefs

`lg:` keeps the store's owners apart from every other owner of the tenant (a person's memory,
an agent's); `:` joins the labels. A label keeps its letters, digits, `_`, `@` and `-`; any other
character becomes `.` and the two lowercase hex digits of each of its UTF-8 bytes (`a b` is
`a.20b`). A label never contains `.` (LangGraph refuses it), so `.` is free to escape with and
decoding is unambiguous; an owner is the store's only if it decodes and encodes back to itself,
so an owner written by other means is never mistaken for a namespace. An owner is at most 128
characters: a namespace longer than that once encoded cannot be stored (ValueError), nor one
with a label that is not Unicode text (a lone surrogate has no UTF-8 bytes).

The item's key (any text, as LangGraph's own stores take) becomes the fact's key, reversibly:
letters, digits and `. _ / -` stay, so the archive, its console and its citations show the keys
applications usually choose (`m1`, a uuid, `prefs/food.v2`) as they are; any other character
becomes `:` and the hex of its UTF-8 bytes (`food pref` is `food:20pref`). A memory key starts
with a letter or a digit, so an escaped key that would not (`_draft`, the empty key) is led by
`k::`, which no escaped key can begin with (`:` is always followed by hex digits). A key that is
more than 100 characters once escaped, or not Unicode text, is a ValueError.

The value is the compact JSON of the item's dict. An item put with `index=False` is stored as
`[<dict>, {"index": false}]`: a JSON array, which no item's value (a dict) can be, so the flag
needs no reserved key in the dict and survives a restart; the archive still indexes the text,
and the store drops such an item from a query's ranking.

Nothing here imports LangGraph: the rules are plain functions the store calls.
"""

from __future__ import annotations

import json
import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mnemo_sea.archive import InvalidInput, json_text, limits
from mnemo_sea.integrations.id_escapes import IdEscape

OWNER_PREFIX = "lg:"
OWNER_CHARS = limits.ID_CHARS
KEY_CHARS = limits.MEMORY_KEY_CHARS
VALUE_CHARS = limits.MEMORY_VALUE_CHARS
# The archive's owner rule (principal._ID).
_OWNER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")
# A label never holds `.` (LangGraph refuses it), so it is free to escape with.
_LABEL = IdEscape(frozenset(string.ascii_letters + string.digits + "_@-"), ".")
# An item key keeps what memory keys allow except `:`, its escape mark.
_KEY = IdEscape(frozenset(string.ascii_letters + string.digits + "._/-"), ":")
_KEY_LEAD = "k::"
_NOT_INDEXED = {"index": False}


# ---- namespaces and owners -------------------------------------------------------------------------


def is_text(label: str) -> bool:
    """Whether `label` is Unicode text, which has UTF-8 bytes (a lone surrogate has none)."""
    try:
        label.encode()
    except UnicodeEncodeError:
        return False
    return True


def owner_prefix(labels: Sequence[str]) -> str:
    """The text every owner of a namespace starting with `labels` starts with (not only those:
    `lg:ab` starts with `lg:a` too; `namespace_of` and a tuple comparison settle it). Each
    label must be text (`is_text`)."""
    return OWNER_PREFIX + ":".join(_LABEL.encode(label) for label in labels)


def owner_of(namespace: Sequence[str]) -> str | None:
    """The owner the namespace's items are kept under; None when it cannot be one (too long, or
    a label that is not text), so it holds nothing."""
    if not namespace or not all(is_text(label) for label in namespace):
        return None
    owner = owner_prefix(namespace)
    return owner if _OWNER.fullmatch(owner) else None


def require_owner(namespace: Sequence[str]) -> str:
    """`owner_of`, or ValueError saying why the namespace cannot be stored."""
    owner = owner_of(namespace)
    if owner is None and not all(is_text(label) for label in namespace):
        raise ValueError(
            f"namespace {tuple(namespace)!r} has a label that is not Unicode text (a lone surrogate): "
            "it cannot be stored"
        )
    if owner is None:
        raise ValueError(
            f"namespace {tuple(namespace)!r} is {len(owner_prefix(namespace))} characters once encoded "
            f"as a memory owner ({owner_prefix(namespace)[:40]}...); at most {OWNER_CHARS} fit: use "
            "shorter labels, or fewer"
        )
    return owner


def namespace_of(owner: str) -> tuple[str, ...] | None:
    """The namespace an owner encodes; None for an owner the store did not write."""
    if not owner.startswith(OWNER_PREFIX):
        return None
    labels = []
    for part in owner.removeprefix(OWNER_PREFIX).split(":"):
        label = _LABEL.decode(part)
        if not label:
            return None
        labels.append(label)
    return tuple(labels) if owner_of(labels) == owner else None


def namespace_matches(namespace: tuple[str, ...], path: Sequence[str], *, suffix: bool) -> bool:
    """Whether `namespace` starts (or ends) with `path`, `*` matching any one label."""
    if len(namespace) < len(path):
        return False
    labels = namespace[len(namespace) - len(path) :] if suffix else namespace[: len(path)]
    return all(p in ("*", label) for label, p in zip(labels, path, strict=True))


# ---- keys ------------------------------------------------------------------------------------------


def fact_key(key: object) -> str | None:
    """The fact's key of the item key `key`; None when it cannot be one (not text, too long)."""
    if not isinstance(key, str) or not is_text(key):
        return None
    escaped = _KEY.encode(key)
    if not (escaped[:1].isascii() and escaped[:1].isalnum()):
        escaped = _KEY_LEAD + escaped
    return escaped if len(escaped) <= KEY_CHARS else None


def require_fact_key(key: object) -> str:
    """`fact_key`, or ValueError saying why the key cannot be stored."""
    escaped = fact_key(key)
    if escaped is None:
        raise ValueError(
            f"key {key!r} cannot be stored: a key is text of at most {KEY_CHARS} characters once "
            "escaped (characters other than letters, digits and . _ / - take three each)"
        )
    return escaped


def item_key(key: str) -> str | None:
    """The item key a fact's key stands for; None for a key `fact_key` could not have written."""
    decoded = _KEY.decode(key.removeprefix(_KEY_LEAD))
    return decoded if decoded is not None and fact_key(decoded) == key else None


# ---- values ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredValue:
    value: dict[str, Any]
    indexed: bool


def value_text(value: object, *, indexed: bool) -> str:
    """The fact text of an item's value; ValueError when it is not a JSON object, or too long."""
    if not isinstance(value, Mapping):
        raise ValueError(f"an item's value must be a mapping (a JSON object), got {type(value).__name__}")
    if any(not isinstance(k, str) for k in value):
        raise ValueError("an item's value must have string keys")
    body: Any = dict(value) if indexed else [dict(value), _NOT_INDEXED]
    try:
        text = json_text(body, "an item's value")
    except InvalidInput as e:  # LangGraph's stores raise ValueError for a value they cannot keep
        raise ValueError(e.message) from None
    if len(text) > VALUE_CHARS:
        raise ValueError(
            f"an item's value is {len(text)} characters as JSON; a memory fact holds at most {VALUE_CHARS}"
        )
    if "\x00" in text:  # a NUL survives json.dumps(ensure_ascii=False); the archive refuses it
        raise ValueError("an item's value must not contain NUL characters")
    return text


def stored_value(text: str) -> StoredValue | None:
    """The item a fact's text holds; None for a fact the store did not write."""
    try:
        body = json.loads(text)
    except ValueError:
        return None
    if isinstance(body, dict):
        return StoredValue(body, indexed=True)
    if isinstance(body, list) and len(body) == 2 and isinstance(body[0], dict) and body[1] == _NOT_INDEXED:
        return StoredValue(body[0], indexed=False)
    return None


# ---- filters on values -----------------------------------------------------------------------------

_ORDERED = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator not in _ORDERED:
        raise ValueError(f"unsupported filter operator {operator!r}: use $eq, $ne, $gt, $gte, $lt or $lte")
    a, b = _number(value), _number(operand)
    if a is not None and b is not None:
        return bool(_ORDERED[operator](a, b))
    if isinstance(value, str) and isinstance(operand, str):
        return bool(_ORDERED[operator](value, operand))
    # A missing field, or values of two kinds: no order holds (as in PostgreSQL's JSONB), where
    # LangGraph's InMemoryStore would fail on float(None).
    return False


def _matches(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, dict) and all(_matches(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_matches(v, w) for v, w in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def matches_filter(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes a search filter: each field equal to the filter's value
    (nested dicts and lists compared as JSON), or satisfying its operators ($eq, $ne, $gt, $gte,
    $lt, $lte, as LangGraph's stores read them). ValueError for another operator."""
    return not wanted or all(_matches(value.get(k), v) for k, v in wanted.items())


__all__ = [
    "OWNER_PREFIX",
    "StoredValue",
    "fact_key",
    "is_text",
    "item_key",
    "matches_filter",
    "namespace_matches",
    "namespace_of",
    "owner_of",
    "owner_prefix",
    "require_fact_key",
    "require_owner",
    "stored_value",
    "value_text",
]
