"""References from derived data (summaries, memory facts, task states) to what they came from.

Stored as text so one column can hold any form: `evidence:<evidence_id>` and
`result:<session_id>/<rN>`; task states also cite memory facts, `memory:<owner>/<key>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import InvalidInput
from .principal import check_identifier
from .records import parse_result_id

EVIDENCE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@#-]{0,255}$")
# The ids search gives to what is not an evidence record (an archived result's note, a memory
# fact, a summary) and citations resolve: no evidence record may take one, or the index would
# hold two things under one id and a citation could not say which it names.
RESULT_PREFIX = "result:"  # result:<session>/<rN>, an archived result's note
MEMORY_PREFIX = "memory:"  # memory:<owner>/<key>
SUMMARY_PREFIX = "sum:"  # sum:<uuid hex>, the id summaries get when created
DERIVED_ID_PREFIXES = (RESULT_PREFIX, MEMORY_PREFIX, SUMMARY_PREFIX)


def check_evidence_id(value: object) -> str:
    return check_identifier("evidence_id", value, EVIDENCE_ID)


@dataclass(frozen=True)
class SourceRef:
    kind: str  # evidence | result
    evidence_id: str | None = None
    session_id: str | None = None
    result_id: str | None = None

    def __str__(self) -> str:
        if self.kind == "evidence":
            return f"evidence:{self.evidence_id}"
        return f"result:{self.session_id}/{self.result_id}"

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
            if value.startswith("evidence:"):
                return cls.evidence(value.removeprefix("evidence:"))
            if value.startswith("result:") and "/" in value:
                session_id, _, rid = value.removeprefix("result:").rpartition("/")
                return cls.result(session_id, rid)
        raise InvalidInput(
            "derived_from", f"{value!r} is not a source ref ('evidence:<id>' or 'result:<session>/<rN>')"
        )


EVIDENCE_REF_PREFIX = "evidence:"


def evidence_ref(evidence_id: str) -> str:
    """The ref of an evidence record (every version: a deletion removes them all)."""
    return f"{EVIDENCE_REF_PREFIX}{evidence_id}"


def memory_ref(owner: str, key: str) -> str:
    """The ref of a memory fact (every version), as search and citations name it."""
    return f"{MEMORY_PREFIX}{owner}/{key}"


def session_prefix(session_id: str) -> str:
    """The prefix every result ref of a session starts with (for LIKE matches)."""
    return f"result:{session_id}/"
