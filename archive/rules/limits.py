"""The size limit of every input, named once.

Every text, list and JSON object an operation takes (mnemo_sea/archive/rules/operations.py,
mnemo_sea/system/operations.py) is capped by one of these names, so an input can never cost
more than its cap in work: a value over it is refused before anything is tokenized, embedded
or read from a database. The records carry the caps as field constraints (`max_length`,
`JsonCap`, `ContentCap`), which is how REST and MCP enforce them when they parse JSON and what
their schemas publish (maxLength, maxItems, x-max-json-chars); `Operation.check_caps` reads the
same constraints to enforce them on Python callers (InvalidInput naming the field and the
limit). The archive's own checks (identifier patterns, `ArchivePolicy`) use these names too;
a policy may lower a limit, never raise it above these ceilings.

Lengths are in characters (`len` of the text), except `CONTENT_BYTES` and `ARGUMENTS_BYTES`
(UTF-8 bytes). A JSON object's size is the length of its compact JSON text.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from .errors import ContentTooLarge, InvalidInput, JsonTooDeep

# ---- identifiers and references --------------------------------------------------------------
ID_CHARS = 128  # tenant, subject, session, owner: the identifier pattern's length
EVIDENCE_ID_CHARS = 256  # an evidence record's id
REF_CHARS = 300  # a source ref ('evidence:<id>', 'result:<session>/<rN>', 'memory:<owner>/<key>', 'X@3')
RESULT_ID_CHARS = 10  # 'r' and at most nine digits
IDEMPOTENCY_KEY_CHARS = 255
# ---- tool results ------------------------------------------------------------------------------
CONTENT_BYTES = 16 * 1024 * 1024  # an original (a tool result's content, an evidence body)
ARGUMENTS_BYTES = 64 * 1024  # a tool call's arguments, as JSON
TOOL_NAME_CHARS = 200
MEDIA_TYPE_CHARS = 456  # type/subtype (127 each) and parameters (200)
POLICY_CLASS_CHARS = 64
NOTE_CHARS = 2_000  # an archive note
BATCH_ITEMS = 1_000  # the targets of one archive batch, the records of one ingest batch
# ---- evidence and summaries --------------------------------------------------------------------
SOURCE_CHARS = 1_024
SCOPE_CHARS = 255
LOCATOR_CHARS = 1_024
STATEMENT_CHARS = 4_000
# A version's metadata: the JSON object a caller keeps with it (a LangChain Document's metadata),
# as its compact JSON text.
METADATA_CHARS = 64 * 1024
REASON_CHARS = 2_000  # why a record is retracted
SUMMARY_CHARS = 64_000
SUMMARY_SOURCES = 1_000
TRACE_REF_CHARS = 1_024
# ---- memory ------------------------------------------------------------------------------------
MEMORY_KEY_CHARS = 100
MEMORY_VALUE_CHARS = 8_000
# ---- task state --------------------------------------------------------------------------------
TASK_TEXT_CHARS = 2_000  # the goal, every item, every fact, every reason
TASK_ITEMS = 200  # per list
# ---- search, context, citations ----------------------------------------------------------------
QUERY_CHARS = 16_384  # retrieval's MAX_QUERY_CHARS (an independent layer: a test holds them equal)
FILTER_VALUES = 256  # kinds, scopes, sources or owners one search names (retrieval's MAX_FILTER_VALUES)
INSTRUCTIONS_CHARS = 1_000_000
TOOLS = 256  # tool definitions in one context
TOOL_DEFINITION_CHARS = 100_000  # one tool definition (its canonical JSON, or its text)
TOOLS_CHARS = 1_000_000  # every tool definition of one context together
# JSON values (as json_values_over counts them) of every tool definition together: walking and
# validating a value costs by the value, and 1,000,000 characters of `[]` are 666,666 of them,
# seconds of work; a large real tool set (128 tools of 200-value schemas) is 26,000.
TOOLS_VALUES = 50_000
CITATIONS = 1_000  # citations of one answer
QUOTE_CHARS = 20_000
# Levels of nested arrays and objects (json_depth_over: `[]` and `{}` are 1, `{"a": [1]}` is 2, a
# scalar 0), the one depth every JSON field a caller hands in may have (arguments, tool
# definitions; tool schemas and arguments are a handful of levels deep). A whole document (a
# REST body, an MCP call's arguments object, a file, a line; mnemo_sea.system.json_text) wraps
# its fields in a few levels of its own, so it is allowed a fixed allowance more: a field at
# JSON_DEPTH is accepted on every surface, whether it is the whole document (Python, the CLI's
# `--arguments`) or sits inside one (a REST body, MCP arguments).
JSON_DEPTH = 64
DOCUMENT_JSON_DEPTH = JSON_DEPTH + 4

# A sensitivity or enum name is capped by its vocabulary; these only bound what a parser reads.
NAME_CHARS = 32

# The JSON values (counted as json_values_over counts them) one request body may hold: parsing
# costs by the value, and a body of `[],[],...` within the byte limit held a parser for seconds.
# The most any body's capped fields admit: a context's tools (TOOLS_VALUES), or a result's
# arguments (counted values take at least three characters for two, `[],`, so ARGUMENTS_BYTES
# hold at most two thirds that many: 43,690); the rest of any body is far under the allowance.
BODY_JSON_VALUES = TOOLS_VALUES + 10_000
# Bytes scanned at a time by json_values_over, which stops at the first block past the limit.
_VALUES_BLOCK = 1 << 20


def _measure(
    value: object, limit: int, depth: int, values: int = sys.maxsize
) -> tuple[int | None, str | None]:
    """(the length of `value`'s compact JSON text, or None once it is known to exceed `limit`
    characters, nest deeper than `depth` or hold more than `values` values; which of "chars",
    "depth" or "values" it was). One walk, one count of depth (JSON_DEPTH's): a container is one
    level deeper than the container holding it, the outermost is level 1, a scalar adds none;
    one count of values (json_values_over's: each container's opening bracket and its commas).
    It stops at the first excess, so it costs at most about min(`limit`, `values`) steps
    whatever the value's size."""
    size = 0
    count = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            size += len(item) + 2
        elif isinstance(item, Mapping | list | tuple):
            if level > depth:
                return None, "depth"
            size += 2 + max(len(item) - 1, 0)
            count += 1 + max(len(item) - 1, 0)
            if size > limit:  # before iterating: len() of a huge object is free, its items not
                return None, "chars"
            if count > values:
                return None, "values"
            if isinstance(item, Mapping):
                for key, inner in item.items():
                    size += len(str(key)) + 3
                    stack.append((inner, level + 1))
            else:
                stack.extend((inner, level + 1) for inner in item)
        elif item is None or isinstance(item, bool):
            size += 4 if item is None or item else 5
        else:
            size += len(repr(item))
        if size > limit:
            return None, "chars"
    return size, None


def json_size(value: object, limit: int, depth: int = JSON_DEPTH) -> int | None:
    """The length of `value`'s compact JSON text (strings counted unescaped), or None as soon as
    it is known to exceed `limit` characters or nest deeper than `depth` levels (counted as
    json_depth_over counts them): the walk stops there, so measuring costs at most about `limit`
    steps whatever the value's size."""
    return _measure(value, limit, depth)[0]


def json_depth_over(value: object, limit: int = JSON_DEPTH) -> bool:
    """Whether `value` (what json.loads returns) nests arrays and objects deeper than `limit`
    levels: `[]` and `{}` are 1, `{"a": [1]}` is 2, a scalar is 0. The same walk as json_size
    (without a size limit), iterative, so a value of any depth is measured without recursing."""
    return _measure(value, sys.maxsize, limit)[1] == "depth"


def json_values_over(text: bytes, limit: int, *, block: int = _VALUES_BLOCK) -> bool:
    """Whether the JSON `text` holds more than `limit` values, counted, without parsing it, as its
    commas and opening brackets outside strings (a value more than its commas, per container).

    A scan of the bytes, not a parse: first an upper bound (the same characters inside strings
    too), and only when that is over the limit the exact count, a block at a time so that it
    stops soon after the limit. Escaped backslashes and quotes are removed first, so every
    remaining quote opens or closes a string. Text that is not JSON is counted all the same:
    its parser refuses it afterwards."""
    if text.count(b",") + text.count(b"[") + text.count(b"{") <= limit:
        return False
    bare = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    count = 0
    in_string = False
    for start in range(0, len(bare), block):
        pieces = bare[start : start + block].split(b'"')
        outside = b"".join(pieces[1::2] if in_string else pieces[::2])
        count += outside.count(b",") + outside.count(b"[") + outside.count(b"{")
        if count > limit:
            return True
        if len(pieces) % 2 == 0:  # an odd number of quotes: the block ends on the other side
            in_string = not in_string
    return False


class JsonCap:
    """Field metadata: a JSON value (object, list or text) of at most `chars` characters of
    compact JSON and, when given, at most `values` JSON values, nested at most JSON_DEPTH
    levels. Checked before pydantic validates the value (a 422 naming the field:
    `json_too_large` with the character or value limit, or `json_too_deep` with JSON_DEPTH), and
    published as `x-max-json-chars` (and `x-max-json-values`)."""

    def __init__(self, chars: int, *, values: int | None = None) -> None:
        self.chars = chars
        self.values = values

    def problem(self, value: object) -> tuple[str, str, int] | None:
        """None when `value` is within the cap; else (error code, what is wrong, the limit)."""
        values = sys.maxsize if self.values is None else self.values
        size, over = _measure(value, self.chars, JSON_DEPTH, values)
        if over == "values":
            return "json_too_large", f"holds more than {values} JSON values", values
        if over == "depth":
            return (
                JsonTooDeep.code,
                f"JSON nested deeper than {JSON_DEPTH} levels of arrays and objects; flatten it",
                JSON_DEPTH,
            )
        if size is None:
            return "json_too_large", f"is over {self.chars} characters as JSON", self.chars
        return None

    def check(self, field: str, value: object) -> None:
        """Raise JsonTooDeep or InvalidInput (naming `field` and the limit) past the cap."""
        problem = self.problem(value)
        if problem is None:
            return
        code, message, limit = problem
        if code == JsonTooDeep.code:
            raise JsonTooDeep(field, limit)
        raise InvalidInput(field, message, limit=limit)

    def _check(self, value: Any) -> Any:
        problem = self.problem(value)
        if problem is not None:
            code, message, limit = problem
            raise PydanticCustomError(code, message, {"limit": limit})
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = handler(schema)
        out["x-max-json-chars"] = self.chars
        if self.values is not None:
            out["x-max-json-values"] = self.values
        return out


class ContentCap:
    """Field metadata: an original of at most `max_bytes` bytes (text counts its characters, at
    most its UTF-8 bytes; base64 text its decoded size). Over it, ContentTooLarge (413 over
    REST, `too_large` over MCP), as the archive answers an original over its policy's limit."""

    def __init__(self, max_bytes: int, *, base64: bool = False) -> None:
        self.max_bytes = max_bytes
        self.base64 = base64

    def size(self, value: object) -> int:
        """A lower bound of the bytes `value` stands for (exact for bytes)."""
        if isinstance(value, bytes):
            return len(value)
        if isinstance(value, str):
            return len(value) * 3 // 4 if self.base64 else len(value)
        return 0

    def check(self, field: str, value: object) -> None:
        size = self.size(value)
        if size > self.max_bytes:
            raise ContentTooLarge(field, size, self.max_bytes)

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        def check(value: Any, info: core_schema.ValidationInfo) -> Any:
            self.check(info.field_name or "content", value)
            return value

        return core_schema.with_info_before_validator_function(check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = handler(schema)
        out["maxLength"] = -(-self.max_bytes // 3) * 4 if self.base64 else self.max_bytes
        return out
