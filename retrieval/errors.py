"""Typed errors of the retrieval layer.

Each error carries structured detail (`to_dict`) and its category (mnemo_sea.errors.Category),
so the composition root answers it on every surface in one place without parsing messages.
Search itself reports "no match", "forbidden" and "unavailable" as a `SearchOutcome` status;
these exceptions are for calls that cannot even be attempted (bad input, a locked or mismatched
index) and for writes, which must never half-succeed silently.
"""

from __future__ import annotations

from dataclasses import dataclass

from mnemo_sea.errors import Category, MnemoError


class RetrievalError(MnemoError):
    """Base of every error the retrieval layer raises on purpose: a MnemoError, as the archive's
    errors are (message, detail, `_restore`, `to_dict`, `request_id` are the base's). Raised as
    itself it is the index failing: unavailable, retry later."""

    code = "retrieval_error"
    category = Category.UNAVAILABLE


class InvalidQuery(RetrievalError):
    """A search request is malformed: empty text, too long, a bad filter value, a bad limit."""

    code = "invalid_query"
    category = Category.INVALID_INPUT
    field: str
    problem: str

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}", field=field, problem=problem)

    def _restore(self) -> None:
        self.field = self.detail.get("field", "")
        self.problem = self.detail.get("problem", "")


class InvalidDocument(RetrievalError):
    """A document handed to the index is malformed; nothing of the batch was written."""

    code = "invalid_document"
    category = Category.INVALID_INPUT
    field: str
    problem: str
    evidence_id: str | None

    def __init__(self, field: str, problem: str, evidence_id: str | None = None) -> None:
        where = f" (evidence {evidence_id!r})" if evidence_id else ""
        super().__init__(f"{field}: {problem}{where}", field=field, problem=problem, evidence_id=evidence_id)

    def _restore(self) -> None:
        self.field = self.detail.get("field", "")
        self.problem = self.detail.get("problem", "")
        self.evidence_id = self.detail.get("evidence_id")


@dataclass(frozen=True)
class LockHolder:
    """Who holds an embedded index open: enough to find and ask that process."""

    pid: int
    host: str
    opened_at: str
    program: str

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} ({self.program}, since {self.opened_at})"


class IndexLocked(RetrievalError):
    """An embedded index is already open in another opener; one opener per path.

    `holder` is None only when the holder died between our attempt and our read of the
    lock file, or wrote nothing readable.
    """

    code = "index_locked"

    def __init__(self, path: str, holder: LockHolder | None) -> None:
        who = holder.describe() if holder else "an unknown holder"
        super().__init__(
            f"index at {path} is open in {who}; close it there first (one opener per path)",
            path=path,
            holder=None if holder is None else holder.__dict__.copy(),
        )

    def _restore(self) -> None:
        self.path: str = self.detail.get("path", "")
        holder = self.detail.get("holder")
        # Only the fields this version knows: an answer of a newer server may carry more.
        known = LockHolder.__dataclass_fields__
        self.holder = (
            None if holder is None else LockHolder(**{k: v for k, v in holder.items() if k in known})
        )


class IndexUnavailable(RetrievalError):
    """The index engine (or the embedding model) failed or is closed; nothing was changed by us."""

    code = "index_unavailable"
    component: str
    reason: str

    def __init__(self, component: str, reason: str) -> None:
        super().__init__(f"{component} unavailable: {reason}", component=component, reason=reason)

    def _restore(self) -> None:
        self.component = self.detail.get("component", "")
        self.reason = self.detail.get("reason", "")


class IndexConfigMismatch(RetrievalError):
    """An existing index was built with settings that differ from the ones asked for.

    Document-side encodings (BM25 weights, tokenizer, embedding model) are baked into the
    stored vectors, so mixing settings would silently corrupt rankings; re-index instead.
    """

    code = "index_config_mismatch"
    category = Category.MISCONFIGURED

    def __init__(self, path: str, field: str, stored: object, requested: object) -> None:
        super().__init__(
            f"index at {path} was built with {field}={stored!r}, not {requested!r}; "
            "open it with the stored settings or rebuild it",
            path=path,
            field=field,
            stored=stored,
            requested=requested,
        )

    def _restore(self) -> None:
        self.field: str = self.detail.get("field", "")
        self.stored: object = self.detail.get("stored")
        self.requested: object = self.detail.get("requested")


class ModelExportError(IndexUnavailable):
    """The model could not be exported to ONNX, or its export does not give the torch vectors.
    A deployment's fault (a damaged model package, a cache folder it cannot write), which
    waiting does not mend: its category is misconfigured, not its parent's unavailable."""

    code = "model_export_failed"
    category = Category.MISCONFIGURED

    def __init__(self, reason: str) -> None:
        super().__init__("embedder", reason)
