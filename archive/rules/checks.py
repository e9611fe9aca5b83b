"""Checks of what a caller hands the archive, shared by the features and by the system's loaders:
media types, content as bytes, tool names, a call's arguments, aware datetimes. Pure: no
database, no clock.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime

from .errors import ContentTooLarge, InvalidInput

_MEDIA_TYPE = re.compile(
    r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}(;[ -~]{0,200})?$"
)
# Characters a tool name must not hold: controls (C0 and C1), format characters (bidi
# overrides, zero-width), lone surrogates (not encodable, so not storable) and line/paragraph
# separators; any of them would let a name break or disguise the envelope it is shown in.
_NAME_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# The column widths of tool_results/blobs (storage.schema builds its columns from these): a longer
# value must be a typed error on every backend (PostgreSQL would raise a driver error; SQLite
# would store it silently).
TOOL_NAME_COLUMN = 255
# A source and a scope are the index's exact-match labels (retrieval/fields.py `label`), which
# refuses control characters as mistakes. Refused at the door too: a stored record the index
# refused would never become searchable while its write reported success
# (tests/system/test_input_caps.py holds the two layers equal).
LABEL_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MEDIA_TYPE_COLUMN = 255
TEXT_MEDIA_TYPE = "text/plain; charset=utf-8"
BINARY_MEDIA_TYPE = "application/octet-stream"


def check_label(field: str, value: str) -> str:
    """`value` if it holds no control character (see LABEL_CONTROL), else InvalidInput naming the
    first one and where it is (a source may be a 1,024-character URL)."""
    found = LABEL_CONTROL.search(value)
    if found is not None:
        raise InvalidInput(
            field,
            f"holds a control character ({found.group()!r}) at position {found.start()}; "
            f"a {field} is a search label: one line of printable text",
        )
    return value


def check_tool_name(value: object, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("tool_name", "must be a non-empty string")
    limit = min(limit, TOOL_NAME_COLUMN)
    if len(value) > limit:
        raise InvalidInput("tool_name", f"is {len(value)} characters; the limit is {limit}")
    if any(unicodedata.category(ch) in _NAME_FORBIDDEN_CATEGORIES for ch in value):
        raise InvalidInput(
            "tool_name", "must not contain control, format or line-separator characters, NUL or surrogates"
        )
    return value


def check_media_type(value: object) -> str:
    if (
        not isinstance(value, str)
        or len(value) > MEDIA_TYPE_COLUMN
        or not _MEDIA_TYPE.fullmatch(value.lower())
    ):
        raise InvalidInput(
            "media_type", f"{value!r} is not a media type like 'text/plain' or 'application/json'"
        )
    return value


def content_bytes(content: object, media_type: str | None, limit: int) -> tuple[bytes, str]:
    if isinstance(content, str):
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidInput(
                "content",
                f"is not valid Unicode text (lone surrogate at position {e.start}); pass bytes "
                "for an original that is not text",
            ) from None
        media = TEXT_MEDIA_TYPE if media_type is None else media_type
    elif isinstance(content, bytes | bytearray | memoryview):
        data = bytes(content)
        media = BINARY_MEDIA_TYPE if media_type is None else media_type
    else:
        raise InvalidInput("content", f"must be str or bytes, got {type(content).__name__}")
    if len(data) > limit:
        raise ContentTooLarge("content", len(data), limit)
    return data, check_media_type(media)


def json_text(value: object, field: str, *, compact: bool = True, sort_keys: bool = False) -> str:
    """`value` as JSON text (compact: no spaces after `,` and `:`); InvalidInput naming `field`
    when JSON has no form for it (NaN or an infinity, a date, a set, a key that is not text) or
    it is not Unicode text (a lone surrogate: no UTF-8 bytes, so no database or body can hold it)."""
    try:
        text = json.dumps(
            value,
            ensure_ascii=False,
            sort_keys=sort_keys,
            separators=(",", ":") if compact else None,
            allow_nan=False,
        )
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(field, "must be valid Unicode text (a lone surrogate was found)") from None
    except (TypeError, ValueError) as e:
        raise InvalidInput(
            field, f"must be JSON (objects, lists, strings, finite numbers, booleans, null): {e}"
        ) from None
    return text


def arguments_json(arguments: object, limit: int) -> str:
    """A tool call's arguments as the JSON text `record` stores (`{}` for None); InvalidInput
    when they are not a JSON object of Unicode text, ContentTooLarge over `limit` UTF-8 bytes."""
    if arguments is None:
        return "{}"
    if not isinstance(arguments, Mapping):
        raise InvalidInput("arguments", f"must be a mapping, got {type(arguments).__name__}")
    encoded = json_text(dict(arguments), "arguments", compact=False, sort_keys=True)
    size = len(encoded.encode("utf-8"))
    if size > limit:
        raise ContentTooLarge("arguments", size, limit)
    return encoded


def aware(field: str, value: datetime | None) -> datetime | None:
    """Reject naive datetimes: an archive that guesses time zones mis-orders evidence."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInput(field, f"must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(field, "must be time-zone aware (e.g. datetime.now(UTC))")
    try:
        return value.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:59-14:00 is past datetime.max in UTC
        raise InvalidInput(field, f"{value.isoformat()} is out of range in UTC") from None
