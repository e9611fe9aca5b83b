"""JSON a user hands in (files, stdin, option values, request bodies), parsed with one nesting limit.

Python's `json` recurses once per nested array or object, so a few kilobytes of `[[[[...` end
in a RecursionError, and a document nested just below that still breaks whatever walks it next
(serialising an answer, copying arguments). Every surface therefore parses user JSON here and
refuses a document nested deeper than MAX_JSON_DEPTH levels with `JsonTooDeep`, a typed
InvalidInput (answered as invalid input on every surface) that names where the JSON came from and the
limit. That is the field limit (archive/rules/limits.py JSON_DEPTH, which the records' JsonCap fields
enforce, `json_too_deep` naming JSON_DEPTH) plus a fixed allowance for the levels a document
wraps its fields in. No document the system itself accepts needs more: tool arguments, JSON
schemas of tool definitions and task-state updates are a handful of levels deep.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from mnemo_sea.archive.rules.limits import DOCUMENT_JSON_DEPTH, JSON_DEPTH, json_depth_over
from mnemo_sea.system.errors import JsonTooDeep

__all__ = [
    "JSON_DEPTH",
    "MAX_JSON_DEPTH",
    "JsonTooDeep",
    "check_json_depth",
    "json_depth_over",
    "parse_json",
]

# A whole document's limit: the archive's field limit (JSON_DEPTH) and a fixed allowance for the
# levels a body or an MCP call wraps its fields in (archive/rules/limits.py DOCUMENT_JSON_DEPTH), so a
# field at its limit is accepted whether it is the whole document or sits inside one. Depth is
# counted by the archive's one walk (limits.json_depth_over): `[]` and `{}` are 1, a scalar 0.
MAX_JSON_DEPTH = DOCUMENT_JSON_DEPTH


def check_json_depth(value: Any, where: str, limit: int = MAX_JSON_DEPTH) -> Any:
    """`value` itself when it nests at most `limit` levels; else raises JsonTooDeep naming `where`."""
    if isinstance(value, dict | list) and json_depth_over(value, limit):
        raise JsonTooDeep(where, limit)
    return value


def parse_json(text: str | bytes, where: str, limit: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads(text)`, refusing nesting deeper than `limit` levels.

    `where` names the input in the error (`tools.json`, `--arguments`, `doc.jsonl line 3`).
    Raises JsonTooDeep (an InvalidInput) when too deeply nested, json.JSONDecodeError when not
    JSON (each caller words that one itself), UnicodeDecodeError for bytes that are not UTF-8.
    """
    try:
        value = json.loads(text)
    except RecursionError:  # nested deeper than the interpreter's stack: far over the limit
        raise JsonTooDeep(where, limit) from None
    return check_json_depth(value, where, limit)


def validation_problems(error: ValidationError, shown: int) -> str:
    """What a document parsed into a typed record got wrong, for a person: the first `shown`
    problems, each with where it is (`arms.full.requests: …`), and how many more there are."""
    found = error.errors()
    listed = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'the document'}: {e['msg']}" for e in found[:shown]
    )
    return listed + (f" (and {len(found) - shown} more)" if len(found) > shown else "")
