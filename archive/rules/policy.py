"""What the archive may set aside, what goes stale, and the input limits.

Policy classes are labels a caller puts on a tool result when it records it. Two sets
decide behaviour:

- protected classes are never archived away: they stay in the live context verbatim
  (user-confirmed facts, prescription basis, approval records in a clinic);
- time-sensitive classes are still recoverable, but a recovered copy is only what the
  tool said at `observed_at`, so it carries a warning to re-query the live system; so does a
  live result of such a class once it is `stale_after_seconds` old (a price read this morning
  is yesterday's price by the evening, whether or not it was ever archived).

Policy decisions read only these typed fields, never the tool's text: tool output is data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import limits
from .errors import InvalidInput

DEFAULT_PROTECTED_CLASSES = frozenset(
    {"user_confirmed_fact", "prescription_basis", "approval_record", "vet_approval"}
)
DEFAULT_TIME_SENSITIVE_CLASSES = frozenset(
    {"price", "stock", "inventory", "availability", "approval_progress"}
)

_POLICY_CLASS = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


MAX_LIST_LIMIT = 10_000  # the most rows one listing call returns
MAX_STALE_AFTER = 366 * 24 * 3600.0  # a year: beyond it, a class is not time-sensitive


def check_list_limit(limit: object) -> int:
    """A listing's `limit`: an integer from 1 to MAX_LIST_LIMIT, else InvalidInput."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_LIST_LIMIT:
        raise InvalidInput("limit", f"must be an integer from 1 to {MAX_LIST_LIMIT}, got {limit!r}")
    return limit


MAX_OFFSET = 2**63 - 1  # the largest integer SQL stores: a larger one fails in the driver


def check_offset(offset: object) -> int:
    """A listing's `offset`: an integer from 0, else InvalidInput."""
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= MAX_OFFSET:
        raise InvalidInput("offset", f"must be an integer from 0 to {MAX_OFFSET}, got {offset!r}")
    return offset


def check_prefix(prefix: object, limit: int) -> str | None:
    """A listing's `prefix` (ids starting with it are listed; None lists all): text of at most
    `limit` characters without NUL, else InvalidInput. Its `%`, `_` and `\\` are literal
    characters: the listings escape them (`starts_with`)."""
    if prefix is None:
        return None
    if not isinstance(prefix, str):
        raise InvalidInput("prefix", f"must be a string, got {type(prefix).__name__}")
    if len(prefix) > limit:
        raise InvalidInput("prefix", f"is {len(prefix)} characters; at most {limit}", limit=limit)
    if "\x00" in prefix:
        raise InvalidInput("prefix", "must not contain NUL")
    return prefix


def check_policy_class(value: object) -> str:
    if not isinstance(value, str) or not _POLICY_CLASS.fullmatch(value):
        raise InvalidInput(
            "policy_class", f"{value!r} is not a policy class (lower-case letters, digits, _; max 64)"
        )
    return value


_CEILINGS = {
    "max_content_bytes": limits.CONTENT_BYTES,
    "max_note_chars": limits.NOTE_CHARS,
    "max_tool_name_chars": limits.TOOL_NAME_CHARS,
    "max_arguments_bytes": limits.ARGUMENTS_BYTES,
    "max_batch_size": limits.BATCH_ITEMS,
}


@dataclass(frozen=True)
class ArchivePolicy:
    """Limits and classes; every field has a safe default and can be configured. A limit may be
    set lower than its ceiling in limits.py (the records' caps, checked before any work), never
    higher: a value the records refuse could never reach the archive."""

    protected_classes: frozenset[str] = DEFAULT_PROTECTED_CLASSES
    time_sensitive_classes: frozenset[str] = DEFAULT_TIME_SENSITIVE_CLASSES
    max_content_bytes: int = limits.CONTENT_BYTES
    max_note_chars: int = limits.NOTE_CHARS
    max_tool_name_chars: int = limits.TOOL_NAME_CHARS
    max_arguments_bytes: int = limits.ARGUMENTS_BYTES
    max_batch_size: int = limits.BATCH_ITEMS
    # Model inferences are candidates, not facts; they are persisted only if this is set.
    persist_model_inferences: bool = False
    # How old a live result of a time-sensitive class may be before it carries the re-query
    # warning: its age counts to now or to the session's newest observation, whichever is later.
    stale_after_seconds: float = 900.0

    def __post_init__(self) -> None:
        for name in ("protected_classes", "time_sensitive_classes"):
            values = frozenset(getattr(self, name))
            for v in values:
                check_policy_class(v)
            object.__setattr__(self, name, values)
        for name, ceiling in _CEILINGS.items():
            if not 0 < getattr(self, name) <= ceiling:
                raise InvalidInput(name, f"must be positive and at most {ceiling} (limits.py)")
        stale = self.stale_after_seconds
        if isinstance(stale, bool) or not isinstance(stale, int | float) or not 0 < stale <= MAX_STALE_AFTER:
            raise InvalidInput(
                "stale_after_seconds", f"must be a number of seconds from 0 to {MAX_STALE_AFTER}"
            )

    def is_protected(self, policy_class: str) -> bool:
        return policy_class in self.protected_classes

    def is_time_sensitive(self, policy_class: str) -> bool:
        return policy_class in self.time_sensitive_classes


DEFAULT_POLICY = ArchivePolicy()
