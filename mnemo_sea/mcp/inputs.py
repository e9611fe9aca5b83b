"""The typed arguments of each agent tool; their JSON Schemas are what `tools/list` publishes.

Each tool's input is its operation's record (mnemo_sea/archive/rules/operations.py,
mnemo_sea/system/operations.py) plus what MCP has no path or header for: `session_id`
(`InSession`) and `idempotency_key` (`Idempotent`). Nothing is declared here, so a tool's
arguments are named and typed as the REST body, the CLI options and the `Mnemo` parameters of
the same operation. The schemas check shapes (types, enums, ranges, size caps) so a model sees its mistake
named by field; the archive still validates every value itself, so nothing here is the last
line of defence. Unknown fields are refused: a misspelt argument must not be silently ignored.
"""

from __future__ import annotations

from mnemo_sea.archive import (
    ArchiveResultsOp,
    Idempotent,
    InSession,
    LiveViewOp,
    RecordOp,
    RecoverOp,
    RememberOp,
    TaskStateOp,
    UpdateTaskStateOp,
)
from mnemo_sea.system.operations import CheckCitationsOp, ContextOp, CurateOp, GetResultOp, SearchOp

# The bases' order puts session_id first and idempotency_key last in the published schema.
# No docstrings: the tool's description, not the class's, is what a model reads.


# search_evidence: `SearchOp`.
class SearchEvidenceInput(SearchOp): ...


# record_result: `RecordOp` in a session.
class RecordResultInput(Idempotent, RecordOp, InSession): ...


# archive_results: `ArchiveResultsOp` in a session.
class ArchiveResultsInput(Idempotent, ArchiveResultsOp, InSession): ...


# recover_result: `RecoverOp` in a session.
class RecoverResultInput(Idempotent, RecoverOp, InSession): ...


# read_result: `GetResultOp` in a session.
class ReadResultInput(GetResultOp, InSession): ...


# live_context: `LiveViewOp` in a session.
class LiveContextInput(LiveViewOp, InSession): ...


# remember: `RememberOp`.
class RememberInput(Idempotent, RememberOp): ...


# check_citations: `CheckCitationsOp`.
class CheckCitationsInput(CheckCitationsOp): ...


# assemble_context: `ContextOp` in a session.
class AssembleContextInput(ContextOp, InSession): ...


# curate_context: `CurateOp` in a session.
class CurateContextInput(Idempotent, CurateOp, InSession): ...


# update_task_state: `UpdateTaskStateOp` in a session.
class UpdateTaskStateInput(Idempotent, UpdateTaskStateOp, InSession): ...


# get_task_state: `TaskStateOp` in a session.
class GetTaskStateInput(TaskStateOp, InSession): ...
