"""The vocabulary of indexed fields and the checks every caller-given value passes.

Filter values go to the engine as exact-match keywords, never as query syntax, so quotes and
wildcards are harmless literals; these checks exist to give a clear error for values that can
only be mistakes (control characters, empty strings, absurd lengths) instead of a silent miss.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from .errors import InvalidDocument, InvalidQuery

KINDS = frozenset({"knowledge", "tool_result", "archived_original", "memory", "summary"})
STATUSES = frozenset({"active", "superseded", "retracted", "deleted"})
# Search may see these; retracted and deleted evidence is never a hit.
SEARCHABLE_STATUSES = frozenset({"active", "superseded"})

# The same shape the archive uses for tenant, subject and owner ids.
IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
# Evidence ids are caller-given (`policy:delivery:2026-10`, URLs, paths): wider, still printable.
EVIDENCE_ID = re.compile(r"[A-Za-z0-9][\x21-\x7e]{0,255}")
# scope and source are labels: any printable text without control characters.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# As long as the archive's longest label (an evidence record's source, a URL: 1,024 characters,
# archive/rules/limits.py): every record the archive stores must be indexable, and a search may
# filter by any source it holds. The archive refuses the same control characters
# (tests/system/test_input_caps.py holds the two layers equal).
MAX_LABEL_CHARS = 1_024

# Validity is stored as epoch seconds so range filters work the same on both backends;
# open ends are stored as these far bounds rather than left out, which keeps every
# validity condition a plain indexed range.
BEGINNING_OF_TIME = -62135596800.0  # 0001-01-01T00:00:00Z
END_OF_TIME = 253402300799.0  # 9999-12-31T23:59:59Z


def identifier(field: str, value: object, *, for_query: bool = False) -> str:
    """Return `value` if it is a tenant/owner identifier, else raise InvalidQuery/InvalidDocument."""
    if isinstance(value, str) and IDENTIFIER.fullmatch(value):
        return value
    return _reject(field, value, "is not an identifier (1-128 of letters, digits, . _ : @ -)", for_query)


def evidence_id(value: object) -> str:
    if isinstance(value, str) and EVIDENCE_ID.fullmatch(value):
        return value
    return _reject("evidence_id", value, "is not an evidence id (1-256 printable ASCII, no spaces)", False)


def label(field: str, value: object, *, for_query: bool = False) -> str:
    """A free-text label (scope, source): non-empty, bounded, no control characters."""
    if (
        isinstance(value, str)
        and value.strip()
        and len(value) <= MAX_LABEL_CHARS
        and not _CONTROL.search(value)
    ):
        return value
    return _reject(
        field, value, f"is not a label (1-{MAX_LABEL_CHARS} characters, no control characters)", for_query
    )


def one_of(field: str, value: object, allowed: frozenset[str], *, for_query: bool = False) -> str:
    if isinstance(value, str) and value in allowed:
        return value
    return _reject(field, value, f"must be one of {', '.join(sorted(allowed))}", for_query)


def epoch_seconds(moment: datetime) -> float:
    """A timezone-aware datetime as epoch seconds; naive datetimes are rejected, not guessed."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{moment!r} has no timezone; pass an aware datetime (e.g. tzinfo=UTC)")
    return moment.astimezone(UTC).timestamp()


def epoch_window(valid_from: datetime | None, valid_until: datetime | None) -> tuple[float, float]:
    """A validity as the index stores it: epoch seconds, open ends as the far bounds. A window
    whose end is not after its start here is one the index cannot hold (float seconds: the step
    is 4 us in the year 3000), though the datetimes differ."""
    start = epoch_seconds(valid_from) if valid_from else BEGINNING_OF_TIME
    end = epoch_seconds(valid_until) if valid_until else END_OF_TIME
    return start, end


def _reject(field: str, value: object, problem: str, for_query: bool) -> str:
    shown = repr(value) if not isinstance(value, str) or len(value) <= 60 else repr(value[:60] + "...")
    message = f"{shown} {problem}"
    if for_query:
        raise InvalidQuery(field, message)
    raise InvalidDocument(field, message)
