"""The archive's operations, each one's inputs described once, as a typed record.

LangGraph store's shape: small operation records and thin wrappers. A record's fields are what
every surface calls the operation's inputs. `Archive` and `Mnemo` take them as keyword
parameters of the same names and types, REST's request bodies and MCP's tool inputs are these
records (or compositions of them), and the CLI's options are named after them
(tests/system/test_operation_vocabulary.py compares every surface with the records). A
record's JSON Schema is what REST and MCP publish. Its descriptions are written to teach a model
how to fill each field.

A record checks shapes (types, enums, ranges) where a surface parses JSON into it, strictly
(json_types.py: `true` is not 1, `"1000"` not 1000, a time is ISO text), and caps the size of
every text, list and JSON object (limits.py). The archive still validates every value itself and
raises typed errors that name the field. So the archive builds its records with `of_call`: those
checks, and their error types, stay the archive's; only the size caps are checked there, first
(`check_caps`), so a Python caller meets the same caps as REST and MCP.

Three things travel beside a record, never in it: the principal (who asks), the session an
operation works in (REST's path; MCP's `session_id`, from `InSession`) and the idempotency key
(REST's header; MCP's `idempotency_key`, from `Idempotent`; a keyword argument in Python).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any, ClassVar, Literal, Self

from annotated_types import MaxLen
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetPydanticSchema,
    StrictFloat,
    StrictInt,
    WithJsonSchema,
    with_config,
)
from pydantic.fields import FieldInfo

from . import limits as cap
from .errors import InvalidInput
from .excerpts import DEFAULT_AROUND, MAX_AROUND
from .json_types import IsoTime, IsoTimeAny, no_bool
from .limits import ContentCap, JsonCap
from .principal import Sensitivity
from .records import Provenance, SearchKind

# A fact that outlives a century is not time-sensitive; the bound keeps expiry dates in range.
MAX_TTL = timedelta(days=36_500)
MAX_TTL_SECONDS = int(MAX_TTL.total_seconds())
# The archive's bound on task state versions (an INTEGER column).
MAX_VERSION = 2**31 - 1


def _parsed_as(kind: Any) -> GetPydanticSchema:
    """Validate and publish a field as `kind` while Python callers may pass a plain `str`."""
    return GetPydanticSchema(lambda _source, handler: handler(kind))


# A sensitivity, by name: what every surface publishes and prints. Names parse in any case, and
# numbers still parse (0-3, for callers written before names were the vocabulary), but the
# published schema lists the names only.
Clearance = Annotated[Sensitivity | str, _parsed_as(Sensitivity), BeforeValidator(no_bool)]
ProvenanceName = Provenance
KindName = SearchKind
# Memory facts and summaries are written by remember and create_summary, never stored directly.
StoredKind = Annotated[str, _parsed_as(Literal["knowledge", "tool_result"])]
# Text, or bytes from Python: JSON carries text (REST adds a base64 field for bytes).
TextOrBytes = Annotated[str | bytes, WithJsonSchema({"type": "string"})]
# An original: at most CONTENT_BYTES (the archive's policy may set a lower limit).
Original = Annotated[TextOrBytes, ContentCap(cap.CONTENT_BYTES)]
# Capped texts, by what they are (limits.py names every cap).
Id = Annotated[str, Field(max_length=cap.ID_CHARS)]
Ref = Annotated[str, Field(max_length=cap.REF_CHARS)]
TaskText = Annotated[str, Field(max_length=cap.TASK_TEXT_CHARS)]

_SESSION = "The session (conversation) id, e.g. 'visit-2024-05-01'. Result ids are numbered per session."
_RESULT_ID = "A result id issued by record_result in this session, like 'r3'."
_OWNER = "The person the session is about. Default: the caller; fixed by the session's first write."
_REF = "'evidence:<evidence_id>' or 'result:<session_id>/<rN>'"


class Operation(BaseModel):
    """One operation's inputs. Unknown fields are refused: a misspelt one is never ignored."""

    model_config = ConfigDict(extra="forbid")
    # True where the archive checks every cap of the record itself, with the same limits, and
    # lists every problem of a call at once before any read (each field of a task state, in
    # task_state_rules.parse_proposal): `of_call` leaves the caps to it rather than answer the first.
    archive_lists_problems: ClassVar[bool] = False

    @classmethod
    def of_call(cls, arguments: Mapping[str, Any]) -> Self:
        """The record of a call to a thin wrapper, from its arguments (`locals()`): its
        parameters are the record's fields (tests/system/test_operation_vocabulary.py), the
        others (self, principal, the session, the idempotency key) are not. Built without
        pydantic's checks: the archive checks every value itself (typed errors naming the
        field), even values the annotations rule out. Only the size caps are checked here
        (`check_caps`), first, so an oversized value costs no work."""
        values = {k: v for k, v in arguments.items() if k in cls.model_fields}
        if not cls.archive_lists_problems:
            check_caps(cls, values)
        return cls.model_construct(**values)

    def as_kwargs(self, *, exclude: Collection[str] = ()) -> dict[str, Any]:
        """The fields (but `exclude`) as keyword arguments of the `Archive`/`Mnemo` method of
        the operation: the names are the same (the vocabulary test checks it).

        Nested records become plain mappings (what the archive accepts); their fields marked
        `exclude` (accepted but ignored) are left out.
        """
        return {
            name: _argument(getattr(self, name)) for name in type(self).model_fields if name not in exclude
        }


def _argument(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, list):
        return [_argument(v) for v in value]
    return value


# ---- the size caps, for Python callers ------------------------------------------------------------

# What checking one value takes: (the field's name as errors show it, the value).
_Check = Callable[[str, object], None]
# Per field of a record: its name, its check, and whether a None there has nothing to check.
_Checks = tuple[tuple[str, _Check, bool], ...]


@functools.cache
def _fields(record: Any) -> _Checks:
    """The checks of a record's fields (an Operation or a dataclass), worked out once per record
    from each field's annotation and metadata; a field with nothing to check is left out. A None
    has nothing to check unless a JSON cap measures it (as `null`): every search passes a
    handful of None filters."""
    if isinstance(record, type) and issubclass(record, BaseModel):
        infos = dict(record.model_fields)
    else:
        hints = typing.get_type_hints(record, include_extras=True)
        infos = {f.name: FieldInfo.from_annotation(hints[f.name]) for f in dataclasses.fields(record)}
    checks = []
    for name, info in infos.items():
        metadata = tuple(info.metadata)
        check = _compiled(info.annotation, metadata)
        if check is not None:
            checks.append((name, check, not _json_capped(metadata)))
    return tuple(checks)


def _json_capped(metadata: tuple[object, ...]) -> bool:
    return any(isinstance(rule, JsonCap) for rule in _rules(metadata))


def _is_record(kind: Any) -> bool:
    return isinstance(kind, type) and (issubclass(kind, BaseModel) or dataclasses.is_dataclass(kind))


def _unit(value: object) -> str:
    return "characters" if isinstance(value, str) else "bytes" if isinstance(value, bytes) else "items"


def _compiled(kind: Any, metadata: tuple[object, ...]) -> _Check | None:
    """The check of a value annotated `kind` with `metadata`, or None when there is nothing to
    check. Worked out once per field, not per call: walking the annotation on every value
    (typing.get_origin, get_args, the metadata) took about 20 us of each search's 11 fields.

    In order: the caps of `metadata` (a FieldInfo's own, depth first), then, for a value that is
    not None, what its type holds: an Annotated's caps and type, each arm of a union, each item
    of a list, the fields of a nested record."""
    rules = _rules(metadata)
    inner = _of_type(kind)
    if not rules and inner is None:
        return None

    def check(field: str, value: object) -> None:
        for rule in rules:
            if isinstance(rule, MaxLen):
                if isinstance(value, str | bytes | list | tuple | Mapping) and len(value) > rule.max_length:
                    raise InvalidInput(
                        field,
                        f"is {len(value)} {_unit(value)}; at most {rule.max_length}",
                        limit=rule.max_length,
                    )
            else:
                rule.check(field, value)
        if inner is not None and value is not None:
            inner(field, value)

    return check


def _rules(metadata: tuple[object, ...]) -> tuple[MaxLen | JsonCap | ContentCap, ...]:
    """The caps among `metadata`, a FieldInfo's own in its place (depth first)."""
    found: list[MaxLen | JsonCap | ContentCap] = []
    for rule in metadata:
        if isinstance(rule, FieldInfo):
            found += _rules(tuple(rule.metadata))
        elif isinstance(rule, MaxLen | JsonCap | ContentCap):
            found.append(rule)
    return tuple(found)


def _of_type(kind: Any) -> _Check | None:
    """The check a value's type asks for beyond the field's own caps (see `_compiled`)."""
    if kind is None:
        return None
    origin = typing.get_origin(kind)
    if origin is Annotated:
        inner, *more = typing.get_args(kind)
        return _compiled(inner, tuple(more))
    if origin in (typing.Union, types.UnionType):
        arms = tuple(c for arm in typing.get_args(kind) if (c := _compiled(arm, ())) is not None)
        if not arms:
            return None

        def each_arm(field: str, value: object) -> None:
            for arm_check in arms:
                arm_check(field, value)

        return each_arm
    if origin is list:
        (item,) = typing.get_args(kind)
        item_check = _compiled(item, ())
        if item_check is None:
            return None

        def each_item(field: str, value: object) -> None:
            if isinstance(value, list | tuple):
                for i, v in enumerate(value):
                    item_check(f"{field}[{i}]", v)

        return each_item
    if _is_record(kind):

        def nested(field: str, value: object) -> None:
            if not isinstance(value, str | bytes | list | tuple):
                check_caps(kind, value, at=f"{field}.")

        return nested
    return None


def check_caps(record: Any, values: object, *, at: str = "") -> None:
    """Enforce a record's size caps (limits.py) on `values`, a mapping of its fields or an object
    holding them as attributes, nested records included: InvalidInput names the first field
    over its cap (`at` prefixes nested names, e.g. `targets[3].note`) and carries the `limit`;
    an original over CONTENT_BYTES is ContentTooLarge. Values of a wrong type are left to the
    archive's own checks. Costs at most about a cap's worth of work per field."""
    # Asked once, not per field: an ABC's isinstance is not free, and a search asks for 11 fields.
    mapping = values if isinstance(values, Mapping) else None
    for name, check, none_passes in _fields(record):
        if mapping is not None:
            if name not in mapping:
                continue
            value = mapping[name]
        elif hasattr(values, name):
            value = getattr(values, name)
        else:
            continue
        if value is None and none_passes:
            continue
        check(at + name, value)


# ---- what travels beside a record --------------------------------------------------------------


class InSession(Operation):
    """The session an operation works in, for surfaces without a path (MCP)."""

    session_id: Id = Field(description=_SESSION)


class Idempotent(Operation):
    """The idempotency key, for surfaces without headers (MCP)."""

    idempotency_key: str | None = Field(
        None,
        max_length=cap.IDEMPOTENCY_KEY_CHARS,
        description="Optional; retrying with the same key returns the first answer and writes nothing again.",
    )


# ---- sessions ----------------------------------------------------------------------------------


class ResultMetadata(Operation):
    """What a recorded result says about itself: `RecordOp` without its content (REST carries the
    content as text or base64)."""

    tool_name: str = Field(
        max_length=cap.TOOL_NAME_CHARS, description="The tool that produced the result, e.g. 'lab_results'."
    )
    arguments: Annotated[dict[str, Any] | None, JsonCap(cap.ARGUMENTS_BYTES)] = Field(
        None, description="The arguments the tool was called with."
    )
    media_type: str | None = Field(
        None,
        max_length=cap.MEDIA_TYPE_CHARS,
        description="The content's media type, e.g. 'application/json'. Default: text/plain.",
    )
    observed_at: IsoTime | None = Field(
        None, description="When the tool produced it (ISO-8601 with time zone). Default: now."
    )
    sensitivity: Clearance = Field(
        Sensitivity.INTERNAL,
        description="How sensitive the content is; readers need at least this clearance.",
    )
    policy_class: str = Field(
        "default",
        max_length=cap.POLICY_CLASS_CHARS,
        description="What kind of evidence this is. Protected classes (prescription_basis, vet_approval, "
        "approval_record, user_confirmed_fact) can never be archived; time-sensitive ones (price, stock, "
        "inventory, availability, approval_progress) come back from recovery with a staleness warning.",
    )
    owner: Id | None = Field(None, description=_OWNER)


class RecordOp(ResultMetadata):
    """Record a tool result in a session (created by its first result); it gets the next id."""

    content: Original = Field(description="The tool's output, exactly as returned (stored verbatim).")


@with_config(ConfigDict(extra="forbid"))
@dataclass(frozen=True)
class ArchiveTarget:
    """One item of an archive batch: which result to set aside, and the agent's note for it."""

    result_id: Annotated[str, Field(max_length=cap.RESULT_ID_CHARS, description=_RESULT_ID)]
    note: Annotated[
        str,
        Field(
            max_length=cap.NOTE_CHARS,
            description="Replaces the result in the context: what it held and why it might matter later, "
            "e.g. 'CBC from 2024-05-01: all values normal except ALT 112 (high); relevant to dosing'.",
        ),
    ]


class ArchiveResultsOp(Operation):
    """Archive results all or nothing, each replaced in the live view by its note."""

    targets: list[ArchiveTarget] = Field(
        min_length=1,
        max_length=cap.BATCH_ITEMS,
        description="Every result to archive now, each with its note: one batch, all or nothing.",
    )


class RecoveredResult(Operation):
    """Which archived result to bring back (REST names it in the path)."""

    result_id: str = Field(
        max_length=cap.RESULT_ID_CHARS, description="The archived result to bring back, like 'r3'."
    )


class ExcerptSpan(Operation):
    """At most one span: the part of the original to bring back (none: all of it)."""

    lines: tuple[StrictInt, StrictInt] | None = Field(
        None,
        description="Only these lines of the original, [first, last]: counted from 1, both included, "
        "e.g. [120, 140]. Line numbers are the original's, also when recovering an excerpt's copy.",
    )
    byte_range: tuple[StrictInt, StrictInt] | None = Field(
        None,
        description="Only these bytes of the original, [start, end): start counted from 0, end not included.",
    )
    match: str | None = Field(
        None,
        max_length=cap.QUOTE_CHARS,
        description="Only the line(s) holding the first occurrence of this text (exact, else ignoring case), "
        "with `around` lines on each side, e.g. 'p99 latency' or 'FAILED tests/test_io.py'.",
    )
    around: StrictInt = Field(
        DEFAULT_AROUND,
        ge=0,
        le=MAX_AROUND,
        description="With match: lines of context before and after the matching line(s).",
    )


class RecoverOp(ExcerptSpan, RecoveredResult):
    """Bring back an archived result's exact original, or an excerpt of it, appended to the
    session as historical."""


class LiveViewOp(Operation):
    """The session's working context: live envelopes and in-place archive stubs (the session is
    the operation's only input)."""


# ---- evidence and summaries --------------------------------------------------------------------


@with_config(ConfigDict(extra="forbid"))
@dataclass(frozen=True)
class EvidenceInput:
    """What a caller gives to store one version of an evidence record (`put_evidence`, and each
    item of `ingest`). A plain dataclass, so it is built positionally and unchecked in Python."""

    body: Annotated[Original, Field(description="the original text of the evidence")]
    source: Annotated[
        str, Field(max_length=cap.SOURCE_CHARS, description="where it came from (a URL, a file, a system)")
    ]
    evidence_id: Annotated[
        str | None,
        Field(
            max_length=cap.EVIDENCE_ID_CHARS,
            description="stable id; a new body for the same id is a new version",
        ),
    ] = None
    scope: Annotated[
        str, Field(max_length=cap.SCOPE_CHARS, description="a partition searches can be limited to")
    ] = "default"
    locator: Annotated[
        str, Field(max_length=cap.LOCATOR_CHARS, description="where in the source (page, section, row)")
    ] = ""
    statement: Annotated[
        str | None, Field(max_length=cap.STATEMENT_CHARS, description="a short claim the evidence supports")
    ] = None
    media_type: Annotated[
        str | None,
        Field(max_length=cap.MEDIA_TYPE_CHARS, description="the body's media type; default text/plain"),
    ] = None
    observed_at: Annotated[IsoTimeAny | None, Field(description="when it was observed; default now")] = None
    valid_from: Annotated[IsoTimeAny | None, Field(description="when its content starts to hold")] = None
    valid_until: Annotated[IsoTimeAny | None, Field(description="when its content stops holding")] = None
    sensitivity: Annotated[Clearance, Field(description="readers need at least this clearance")] = (
        Sensitivity.INTERNAL
    )
    provenance: Annotated[ProvenanceName, Field(description="where the content comes from")] = "document"
    kind: Annotated[StoredKind, Field(description="knowledge, or a tool result kept as evidence")] = (
        "knowledge"
    )
    owner: Annotated[Id | None, Field(description="the person it is about, if any")] = None
    session_id: Annotated[Id | None, Field(description="the session it came from, if any")] = None
    metadata: Annotated[
        dict[str, Any] | None,
        JsonCap(cap.METADATA_CHARS),
        Field(
            description="a JSON object kept with this version and returned with it and on search hits "
            "(e.g. a document's page, title, tags); never searched"
        ),
    ] = None


class RetractOp(Operation):
    """Withdraw the current version of an evidence record (it stays in history)."""

    evidence_id: str = Field(
        max_length=cap.EVIDENCE_ID_CHARS, description="The record whose current version is withdrawn."
    )
    reason: str = Field(
        max_length=cap.REASON_CHARS, description="Why it is withdrawn (kept in the audit log)."
    )


class CreateSummaryOp(Operation):
    """A derived summary of existing sources: searchable, labelled derived wherever shown."""

    text: str = Field(max_length=cap.SUMMARY_CHARS, description="The summary's text.")
    derived_from: list[Ref] = Field(
        max_length=cap.SUMMARY_SOURCES, description=f"The sources it summarises: {_REF} each."
    )
    trace_ref: str | None = Field(
        None, max_length=cap.TRACE_REF_CHARS, description="Where it came from (e.g. a run id)."
    )


# ---- memory ------------------------------------------------------------------------------------


class RememberOp(Operation):
    """Store a fact for an owner, superseding the previous value of its key."""

    owner: Id = Field(description="Whose fact this is (a user or patient id).")
    key: str = Field(
        max_length=cap.MEMORY_KEY_CHARS,
        description="The fact's name, e.g. 'allergy' or 'preferred_pharmacy' (letters, digits and "
        ". _ : / -; at most 100 characters).",
    )
    value: str = Field(
        min_length=1,
        max_length=cap.MEMORY_VALUE_CHARS,
        description="The fact itself; replaces the previous value of the key.",
    )
    provenance: ProvenanceName = Field(
        description="Where it comes from: user_claim, user_correction, document, tool_fact, or "
        "model_inference (a guess: returned as a candidate and not stored)."
    )
    ttl_seconds: StrictFloat | None = Field(
        None,
        gt=0,
        le=MAX_TTL_SECONDS,
        description="Forget the fact after this many seconds (prices, stock...); at most 100 years.",
    )
    derived_from: Ref | None = Field(None, description=f"What it came from: {_REF}.")


class ForgetOp(Operation):
    """Delete every version of one fact, with its index points and cached searches."""

    owner: Id = Field(description="Whose fact this is.")
    key: str = Field(max_length=cap.MEMORY_KEY_CHARS, description="The fact's name.")


# ---- task state --------------------------------------------------------------------------------


class ConfirmedFactInput(Operation):
    """One fact a task state update holds as settled, with the evidence it rests on."""

    fact: TaskText = Field(description="What you hold as settled, in one line.")
    evidence_id: Ref = Field(
        description="What it rests on: an evidence id from search_evidence (or 'X@3' for one version), "
        "'result:<session>/<rN>' for a tool result, or 'memory:<owner>/<key>'. Summaries are not evidence."
    )
    resolves: TaskText | None = Field(
        None,
        description="An unresolved item or pending operation of the current version this fact settles, "
        "word for word; the item then leaves those lists.",
    )
    # Accepted so a fact read back can be sent again; left out of `as_kwargs()` (exclude).
    version: StrictInt | None = Field(
        None,
        exclude=True,
        description="Ignored (the archive sets it); accepted so a fact read back can be sent again.",
    )
    ref: Ref | None = Field(None, exclude=True, description="Ignored (the archive sets it), like version.")


class ReleaseInput(Operation):
    """An item of the current version let go of on purpose."""

    item: TaskText = Field(
        description="A constraint, unresolved item or pending operation of the current version, "
        "word for word."
    )
    reason: TaskText = Field(description="Why you let go of it, e.g. 'the owner lifted the limit'.")


class UpdateTaskStateOp(Operation):
    """The next version of a session's task state, whole: what is left out of it is dropped, and a
    dropped constraint or open item needs a release reason (or a fact that settles it)."""

    archive_lists_problems = True  # TaskStateRejected: every problem of the write

    goal: TaskText = Field(description="What you are trying to achieve in this session, in one line.")
    confirmed: list[ConfirmedFactInput] = Field(
        default_factory=list,
        max_length=cap.TASK_ITEMS,
        description="Every fact you hold as settled, each citing its evidence (carry the current ones over).",
    )
    unresolved: list[TaskText] = Field(
        default_factory=list, max_length=cap.TASK_ITEMS, description="What is still unknown, one item each."
    )
    constraints: list[TaskText] = Field(
        default_factory=list,
        max_length=cap.TASK_ITEMS,
        description="What must hold or must not be done (e.g. 'no ivermectin: MDR1 mutant'), kept "
        "word for word.",
    )
    pending_operations: list[TaskText] = Field(
        default_factory=list,
        max_length=cap.TASK_ITEMS,
        description="Operations you started whose outcome you do not know yet (e.g. 'refund requested').",
    )
    trace_ref: str | None = Field(
        None,
        max_length=cap.TRACE_REF_CHARS,
        description="Optional: where the raw trace this condenses lives.",
    )
    release: list[ReleaseInput] = Field(
        default_factory=list,
        max_length=cap.TASK_ITEMS,
        description="Items of the current version you drop on purpose, each with the reason.",
    )
    expected_version: StrictInt | None = Field(
        None,
        ge=0,
        le=MAX_VERSION,
        description="The version you read (0: none yet); the write is refused if another is current by then.",
    )
    owner: Id | None = Field(None, description=_OWNER)


class TaskStateOp(Operation):
    """Read a session's task state: the current version, or one earlier version."""

    version: StrictInt | None = Field(
        None, ge=1, le=MAX_VERSION, description="One earlier version. Default: the current one."
    )


# ---- deletion ----------------------------------------------------------------------------------


class DeleteEvidenceOp(Operation):
    """Delete every version of a record and everything derived from it (admin)."""

    evidence_id: str = Field(max_length=cap.EVIDENCE_ID_CHARS, description="The record, every version.")


class DeleteSessionOp(Operation):
    """Delete a session, its results, notes and everything derived from them (admin; the session
    is the operation's only input)."""


class DeleteOwnerOp(Operation):
    """Delete everything about one person (a data-subject request) (admin)."""

    owner: Id = Field(description="The person.")


__all__ = [
    "MAX_TTL",
    "MAX_TTL_SECONDS",
    "MAX_VERSION",
    "ArchiveResultsOp",
    "ArchiveTarget",
    "Clearance",
    "ConfirmedFactInput",
    "CreateSummaryOp",
    "DeleteEvidenceOp",
    "DeleteOwnerOp",
    "DeleteSessionOp",
    "EvidenceInput",
    "ExcerptSpan",
    "ForgetOp",
    "Idempotent",
    "InSession",
    "IsoTime",
    "IsoTimeAny",
    "KindName",
    "LiveViewOp",
    "Operation",
    "Original",
    "ProvenanceName",
    "RecordOp",
    "RecoverOp",
    "RecoveredResult",
    "ReleaseInput",
    "RememberOp",
    "ResultMetadata",
    "RetractOp",
    "StoredKind",
    "TaskStateOp",
    "TextOrBytes",
    "UpdateTaskStateOp",
    "check_caps",
]
