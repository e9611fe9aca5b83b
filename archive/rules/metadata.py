"""An evidence version's metadata: the JSON object a caller keeps with it.

A caller keeps what it knows of a record beside it (a LangChain Document's metadata: page,
title, author, tags); the archive stores it with the version and hands it back on every read
and on search hits, so a retriever rebuilds the caller's document as it was given. It is never
searched, never filtered on, never part of the body's hash.

Only what round-trips through JSON unchanged is accepted: an object with string keys (at every
level: `json.dumps` would silently turn `1` into `"1"`), values that are objects, lists
(a tuple is stored as a list), strings, finite numbers, booleans and null, at most
METADATA_CHARS of compact JSON and JSON_DEPTH levels. Anything else is an InvalidInput naming
`metadata` and where in it the problem is, before anything is written. It is stored as canonical
JSON text (sorted keys), so two objects equal as values are equal as stored: storing the same
body with equal metadata is no new version, with other metadata it is one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from .checks import json_text
from .errors import InvalidInput
from .limits import METADATA_CHARS, JsonCap

FIELD = "metadata"
_CAP = JsonCap(METADATA_CHARS)


def _path(at: str, step: str | int) -> str:
    return f"{at}[{step}]" if isinstance(step, int) else f"{at}[{step!r}]"


def _check_values(value: Mapping[Any, Any]) -> None:
    """InvalidInput at the first value that is not JSON's (the walk is bounded: the size cap
    was checked first)."""
    stack: list[tuple[object, str]] = [(value, FIELD)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, Mapping):
            for key, inner in item.items():
                if not isinstance(key, str):
                    raise InvalidInput(
                        FIELD,
                        f"{at} has the key {key!r} ({type(key).__name__}); JSON object keys are strings",
                    )
                stack.append((inner, _path(at, key)))
        elif isinstance(item, list | tuple):
            stack.extend((inner, _path(at, i)) for i, inner in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidInput(FIELD, f"{at} is {item!r}; JSON numbers are finite")
        elif not (item is None or isinstance(item, str | int | float | bool)):
            raise InvalidInput(FIELD, f"{at} is of type {type(item).__name__}, which is not a JSON value")


def metadata_json(value: object) -> str | None:
    """`value` as the canonical JSON text the archive stores (None for None); InvalidInput
    naming `metadata` (JsonTooDeep past JSON_DEPTH) when it is not a JSON object within the cap."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidInput(FIELD, f"must be a JSON object (a dict), got {type(value).__name__}")
    _CAP.check(FIELD, value)
    _check_values(value)
    text = json_text(value, FIELD, sort_keys=True)
    if len(text) > METADATA_CHARS:
        raise InvalidInput(
            FIELD, f"is {len(text)} characters as JSON; at most {METADATA_CHARS}", limit=METADATA_CHARS
        )
    return text


def metadata_of(text: str | None) -> dict[str, Any] | None:
    """The object a stored `metadata_json` holds (None for NULL): a new dict on every read, so a
    caller changing it changes nothing the archive holds."""
    if text is None:
        return None
    found: dict[str, Any] = json.loads(text)
    return found
