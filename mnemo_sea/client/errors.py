"""Answers as errors: a problem+json answer becomes the typed error the server raised.

The class comes from mnemo_sea.system.outcomes.error_class (the loaded error class of the
problem's `code`, or the most general class of the status's category for an answer without a
class of its own, such as REST's `invalid_request`), and the
error is rebuilt from the problem's `detail` (its message) and extra members (its detail:
`targets` of a rejected batch, `problems` of a refused task state, ...), so `except NotFound`
and `err.targets` work as they do in process. The request id is attached as `request_id`.

A server that cannot be reached is `ApiUnreachable`, a `StoreUnavailable`: the store this
client talks to is the API. An answer the client will not hand back is a `BadAnswer`, an
`IntegrityFailure` (what the API sent is not what it stands for): `MalformedAnswer` when it is not
the shape the operation reads (not JSON, a member missing or of another type), and
`InconsistentAnswer` when it contradicts itself or what the client knows (an original against
its hash, a snippet against its span, a status against the HTTP code). Both name the operation
and the member (`path`, e.g. `hits[2].span`).
"""

from __future__ import annotations

from typing import Any

# Imported for their classes: error_class finds a code's class among the loaded error classes.
import mnemo_sea.archive
import mnemo_sea.context.errors
import mnemo_sea.retrieval.errors
import mnemo_sea.system.errors  # noqa: F401
from mnemo_sea.archive import IntegrityFailure, StoreUnavailable
from mnemo_sea.client.wire import Reply, Request
from mnemo_sea.system.outcomes import error_class, rebuild

# The members every problem has (RFC 9457 and the API's own); the others are the error's detail.
_PROBLEM_MEMBERS = frozenset({"type", "title", "status", "detail", "code", "request_id"})


class ApiUnreachable(StoreUnavailable):
    """The REST API did not answer: no connection, a timeout, or a connection lost before the
    answer, after the client's retries. Unlike the archive's own StoreUnavailable, a write may
    have reached the server (`sent`): a write sent under `idempotency_key` is safe to send
    again with that key (the server answers it once), and the client did so while it retried."""

    code = "api_unreachable"

    def __init__(
        self, url: str, reason: str, *, sent: bool, request_id: str, idempotency_key: str | None = None
    ) -> None:
        again = (
            f"; send it again with idempotency_key={idempotency_key!r} to learn whether it was written"
            if sent and idempotency_key is not None
            else ""
        )
        super().__init__(
            f"the mnemo-sea API at {url} did not answer: {reason}{again}",
            url=url,
            reason=reason,
            sent=sent,
            request_id=request_id,
            idempotency_key=idempotency_key,
        )
        self.request_id = request_id


class BadAnswer(IntegrityFailure):
    """An answer of the API the client refuses to hand back: `operation` (the client's method),
    `path` (the member at fault, `` for the whole body) and `problem` say which and why. Nothing
    of it is returned; a write it answered may have been made (read it back to know)."""

    code = "bad_answer"
    operation: str
    path: str
    problem: str

    def __init__(self, operation: str, path: str, problem: str, **detail: Any) -> None:
        where = f" at {path}" if path else ""
        super().__init__(
            f"the API's answer to {operation or 'a request'} is refused{where}: {problem}",
            operation=operation,
            path=path,
            problem=problem,
            **detail,
        )

    def _restore(self) -> None:
        self.operation = self.detail.get("operation", "")
        self.path = self.detail.get("path", "")
        self.problem = self.detail.get("problem", "")


class MalformedAnswer(BadAnswer):
    """The answer is not what the operation reads: not JSON, a member missing, a value of another
    type (a cut body, a proxy's page served as a success, a server of another version)."""

    code = "malformed_answer"


class InconsistentAnswer(BadAnswer):
    """The answer contradicts itself or what the client knows: content that does not hash to its
    record's hash (or to the hash the caller expects), a snippet that is not its span's length, a
    status member that says the request failed in a success, a record other than the one asked."""

    code = "inconsistent_answer"


def success_of(reply: Reply, request: Request) -> Reply:
    """A success answer as the operations read it, or the BadAnswer it is: a success is JSON
    (every operation answers JSON), and never a problem (a problem+json body, or a `status`
    member with another HTTP status), whatever a proxy or a server bug made of it."""
    if reply.body is None and not reply.json:
        problem = "the success is not JSON" + (
            f" ({reply.text.strip()[:80]!r})" if reply.text.strip() else ""
        )
        raise _attached(MalformedAnswer(request.operation, "", problem), reply, request)
    status = reply.body.get("status") if isinstance(reply.body, dict) else None
    if reply.problem_json or (
        isinstance(status, int) and not isinstance(status, bool) and status != reply.status
    ):
        problem = f"an HTTP {reply.status} success whose body is a problem"
        if isinstance(status, int):
            problem += f" of status {status}"
        raise _attached(InconsistentAnswer(request.operation, "status", problem), reply, request)
    return reply


def _attached(exc: BadAnswer, reply: Reply, request: Request) -> BadAnswer:
    exc.request_id = reply.request_id or request.request_id
    return exc


def error_of(reply: Reply, request: Request) -> BaseException:
    """The typed error an error answer stands for, with the request id attached."""
    body: dict[str, Any] = reply.body if isinstance(reply.body, dict) else {}
    code = reply.problem_code
    if code is None:
        # Not a problem of this API (a proxy's page, say): the status's category decides.
        code = f"http_{reply.status}"
        message = f"HTTP {reply.status} from the API: {reply.text.strip()[:200] or 'no body'}"
    else:
        message = str(body.get("detail") or body.get("title") or code)
    cls = error_class(code, reply.status)
    exc = rebuild(cls, message, {k: v for k, v in body.items() if k not in _PROBLEM_MEMBERS})
    if getattr(exc, "code", None) != code:
        # An answer without a class of its own keeps its code (e.g. invalid_request).
        vars(exc)["code"] = code
    request_id = body.get("request_id") or reply.request_id or request.request_id
    vars(exc)["request_id"] = request_id
    return exc


def unreachable(url: str, request: Request, error: Exception, *, sent: bool) -> ApiUnreachable:
    reason = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return ApiUnreachable(
        url, reason, sent=sent, request_id=request.request_id, idempotency_key=request.idempotency_key
    )


__all__ = [
    "ApiUnreachable",
    "BadAnswer",
    "InconsistentAnswer",
    "MalformedAnswer",
    "error_of",
    "success_of",
    "unreachable",
]
