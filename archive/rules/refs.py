"""References from derived data (summaries, memory facts, task states) to what they came from,
and the index ids of what is not an evidence record: the one place both are built and parsed.

Stored as text so one column can hold any form: `evidence:<evidence_id>` and
`result:<session_id>/<rN>`; task states also cite memory facts, `memory:<owner>/<key>`. The
`result:` and `memory:` forms are also the ids search gives an archived result's note and a
memory fact (`result_index_id`, `memory_index_id`, `parse_index_id`), so a hit can be cited as
it came; a summary's index id is its own `sum:` id. A session id and an owner never contain
`/` (principal.check_identifier), so the first `/` after an owner and the last one before a
result id split an id unambiguously (a memory key may contain `/`).

Outbox rows name one version of an evidence record as `<evidence_id>@<version>` (`version_ref`,
`parse_version_ref`): an evidence id may hold `@`, so the last one splits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import InvalidInput
from .principal import check_identifier
from .tool_results import parse_result_id

EVIDENCE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@#-]{0,255}$")
# The ids search gives to what is not an evidence record (an archived result's note, a memory
# fact, a summary) and citations resolve: no evidence record may take one, or the index would
# hold two things under one id and a citation could not say which it names.
RESULT_PREFIX = "result:"  # result:<session>/<rN>, an archived result's note
MEMORY_PREFIX = "memory:"  # memory:<owner>/<key>
SUMMARY_PREFIX = "sum:"  # sum:<uuid hex>, the id summaries get when created
DERIVED_ID_PREFIXES = (RESULT_PREFIX, MEMORY_PREFIX, SUMMARY_PREFIX)
EVIDENCE_REF_PREFIX = "evidence:"  # evidence:<evidence_id>, a source ref (never an index id)


def check_evidence_id(value: object) -> str:
    return check_identifier("evidence_id", value, EVIDENCE_ID)


def version_ref(evidence_id: str, version: int) -> str:
    """`<evidence_id>@<version>`: how an outbox row names one version of an evidence record, and
    how a committed write hands its versions to the indexer (`EvidenceBatch.made`)."""
    return f"{evidence_id}@{version}"


def parse_version_ref(ref: str) -> tuple[str, int]:
    """(evidence id, version) of a `version_ref` (an evidence id may hold `@`: the last one splits)."""
    evidence_id, _, version = ref.rpartition("@")
    return evidence_id, int(version)


@dataclass(frozen=True)
class ResultIndexId:
    """`result:<session_id>/<rN>`: an archived result's note in the index."""

    session_id: str
    result_id: str

    def __str__(self) -> str:
        return f"{RESULT_PREFIX}{self.session_id}/{self.result_id}"

    @classmethod
    def of_ref(cls, ref: str) -> ResultIndexId:
        """From `<session_id>/<rN>`, as deletion receipts and outbox rows name a result."""
        session_id, _, rid = ref.rpartition("/")
        return cls(session_id, rid)


@dataclass(frozen=True)
class MemoryIndexId:
    """`memory:<owner>/<key>`: a memory fact in the index (every version shares the id)."""

    owner: str
    key: str

    def __str__(self) -> str:
        return f"{MEMORY_PREFIX}{self.owner}/{self.key}"


IndexId = ResultIndexId | MemoryIndexId


def result_index_id(session_id: str, result_id: str) -> str:
    return str(ResultIndexId(session_id, result_id))


def memory_index_id(owner: str, key: str) -> str:
    return str(MemoryIndexId(owner, key))


def parse_index_id(value: str) -> IndexId | None:
    """What a `result:` or `memory:` id names; None for any other id (an evidence record's or a
    summary's, used as they are). Only the shape is checked: whether the session, result, owner
    or key exist (or are well-formed) is for the read that looks them up."""
    if value.startswith(RESULT_PREFIX) and "/" in value:
        session_id, _, rid = value.removeprefix(RESULT_PREFIX).rpartition("/")
        return ResultIndexId(session_id, rid)
    if value.startswith(MEMORY_PREFIX) and "/" in value:
        owner, _, key = value.removeprefix(MEMORY_PREFIX).partition("/")
        return MemoryIndexId(owner, key)
    return None


@dataclass(frozen=True)
class SourceRef:
    kind: str  # evidence | result
    evidence_id: str | None = None
    session_id: str | None = None
    result_id: str | None = None

    def __str__(self) -> str:
        if self.kind == "evidence":
            return f"{EVIDENCE_REF_PREFIX}{self.evidence_id}"
        assert self.session_id is not None and self.result_id is not None
        return result_index_id(self.session_id, self.result_id)

    @classmethod
    def evidence(cls, evidence_id: str) -> SourceRef:
        return cls("evidence", evidence_id=check_evidence_id(evidence_id))

    @classmethod
    def result(cls, session_id: str, result_id: str) -> SourceRef:
        check_identifier("session_id", session_id)
        parse_result_id(result_id)
        return cls("result", session_id=session_id, result_id=result_id)

    @classmethod
    def parse(cls, value: object) -> SourceRef:
        if isinstance(value, SourceRef):
            return value
        if isinstance(value, str):
            if value.startswith(EVIDENCE_REF_PREFIX):
                return cls.evidence(value.removeprefix(EVIDENCE_REF_PREFIX))
            named = parse_index_id(value)
            if isinstance(named, ResultIndexId):
                return cls.result(named.session_id, named.result_id)
        raise InvalidInput(
            "derived_from", f"{value!r} is not a source ref ('evidence:<id>' or 'result:<session>/<rN>')"
        )


def evidence_ref(evidence_id: str) -> str:
    """The ref of an evidence record (every version: a deletion removes them all)."""
    return f"{EVIDENCE_REF_PREFIX}{evidence_id}"


# A memory fact's key. 100 characters: with the owner (128) the index id `memory:<owner>/<key>`
# stays within 256.
MEMORY_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}$")


def memory_ref(owner: str, key: str) -> str:
    """The ref of a memory fact (every version), as search and citations name it: its index id."""
    return memory_index_id(owner, key)


def session_prefix(session_id: str) -> str:
    """The prefix every result ref of a session starts with (for LIKE matches)."""
    return f"{RESULT_PREFIX}{session_id}/"
