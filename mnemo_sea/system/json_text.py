"""JSON a user hands in (files, stdin, option values, request bodies), parsed with one nesting limit.

Python's `json` recurses once per nested array or object, so a few kilobytes of `[[[[...` end
in a RecursionError, and a document nested just below that still breaks whatever walks it next
(serialising an answer, copying arguments). Every surface therefore parses user JSON here and
refuses anything nested deeper than MAX_JSON_DEPTH levels with `JsonTooDeep`, a typed
InvalidInput (exit 2, REST 422, MCP invalid_input) that names where the JSON came from and the
limit. No document the system itself accepts needs more: tool arguments, JSON schemas of tool
definitions and task-state updates are a handful of levels deep.
"""

from __future__ import annotations

import json
from typing import Any

from mnemo_sea.archive.limits import JSON_DEPTH
from mnemo_sea.system.errors import JsonTooDeep

__all__ = ["MAX_JSON_DEPTH", "JsonTooDeep", "check_json_depth", "json_depth_over", "parse_json"]

# Levels of nested arrays and objects: `[]` and `{}` are 1, `{"a": [1]}` is 2, a scalar is 0.
# The archive's one limit (archive/limits.py), so a document and an object field in it agree.
MAX_JSON_DEPTH = JSON_DEPTH


def json_depth_over(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `value` (what json.loads returns) nests arrays and objects deeper than `limit`.
    Iterative, so a value of any depth is measured without recursing."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


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
