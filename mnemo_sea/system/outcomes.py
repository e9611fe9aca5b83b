"""The one table of what every typed error is, and how each surface answers it.

Every error the archive or the retrieval layer raises on purpose has a row here: its category,
and from the category the REST status, the CLI exit code, and (the error's own stable `code`)
the MCP error. `rest.problems`, `mcp.results`, `cli.output` and the `mnemo-sea` commands all ask
`outcome_of`; none keeps a mapping of its own. The REST statuses were the model:

    category          HTTP  exit  meaning
    invalid_input     422   2     the request is malformed, or a batch was rejected whole; nothing
                                  changed (also a deletion receipt or audit anchor this deployment
                                  cannot accept: ReceiptInvalid, though an IntegrityError)
    too_large         413   2     content above the configured limit
    misconfigured     500   2     the settings a process runs with disagree with its stored data
                                  (an index built with another embedder): the operator's to fix,
                                  and on the command line the operator is the one who ran it
    unauthenticated   401   2     no valid API key; on the command line a key is an option value
                                  like any other, fixed the same way
    not_found         404   3     not there, or not this tenant's (the same answer: no oracle)
    forbidden         403   4     role or clearance
    conflict          409   5     the target's state forbids it, or an idempotency key was reused
    unavailable       503   6     a store or index down or locked; nothing changed, retry later
    busy              429   6     the caller's tenant has as many requests in the service as it
                                  may hold (TooManyRequests); nothing was done, retry later
    integrity         500   7     stored bytes fail their hash, a broken audit chain, a corrupt file
    internal          500   1     an error class without a more specific row

Exit 1 also means "a check ran and found problems" (EXIT_PROBLEMS), which no error is.

Retrieval errors are matched by name, once `mnemo_sea.retrieval.errors` is loaded: a command
that fails before it opens the index must not pay for importing the retrieval layer, and while
it is not loaded no error can come from it. Archive and system errors are named the same way, so
the table is one list and this module imports nothing.

The way back, for a client of a surface (mnemo_sea.client): `error_class` finds the class of an
answer's code among the classes of the layers' `errors` modules (ERROR_LAYERS), or for an
answer without an error class of its own the most general class of its status's category, and
`rebuild` makes the error again from its message and detail.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_FORBIDDEN = 4
EXIT_CONFLICT = 5
EXIT_UNAVAILABLE = 6
EXIT_INTEGRITY = 7


class Category(StrEnum):
    """What kind of failure an error is, whatever the surface that reports it."""

    INVALID_INPUT = "invalid_input"
    TOO_LARGE = "too_large"
    MISCONFIGURED = "misconfigured"
    UNAUTHENTICATED = "unauthenticated"
    NOT_FOUND = "not_found"
    FORBIDDEN = "forbidden"
    CONFLICT = "conflict"
    UNAVAILABLE = "unavailable"
    BUSY = "busy"
    INTEGRITY = "integrity"
    INTERNAL = "internal"


# category -> (HTTP status, exit code)
_ANSWERS: dict[Category, tuple[int, int]] = {
    Category.INVALID_INPUT: (422, EXIT_USAGE),
    Category.TOO_LARGE: (413, EXIT_USAGE),
    Category.MISCONFIGURED: (500, EXIT_USAGE),
    Category.UNAUTHENTICATED: (401, EXIT_USAGE),
    Category.NOT_FOUND: (404, EXIT_NOT_FOUND),
    Category.FORBIDDEN: (403, EXIT_FORBIDDEN),
    Category.CONFLICT: (409, EXIT_CONFLICT),
    Category.UNAVAILABLE: (503, EXIT_UNAVAILABLE),
    Category.BUSY: (429, EXIT_UNAVAILABLE),
    Category.INTEGRITY: (500, EXIT_INTEGRITY),
    Category.INTERNAL: (500, EXIT_PROBLEMS),
}

# The table: (layer, error class, category), most specific first; the first row the error is an
# instance of decides. The order matters where classes have two parents or a parent of another
# category: ContentTooLarge is an InvalidInput (413 wins), ReceiptInvalid an IntegrityError (the
# client's document, not the store: 422 wins), ArchiveConflict both a BatchRejected and a
# StateConflict (409 wins), TooManyRequests a StoreUnavailable (429 wins). The base classes come
# last, so no error of either layer falls through.
TABLE: tuple[tuple[str, str, Category], ...] = (
    ("system", "TooManyRequests", Category.BUSY),
    ("archive", "ContentTooLarge", Category.TOO_LARGE),
    ("archive", "ReceiptInvalid", Category.INVALID_INPUT),
    ("archive", "StateConflict", Category.CONFLICT),
    ("archive", "BatchRejected", Category.INVALID_INPUT),
    ("archive", "InvalidInput", Category.INVALID_INPUT),
    ("archive", "NotFound", Category.NOT_FOUND),
    ("archive", "Forbidden", Category.FORBIDDEN),
    ("archive", "Unauthenticated", Category.UNAUTHENTICATED),
    ("archive", "StoreUnavailable", Category.UNAVAILABLE),
    ("archive", "IntegrityError", Category.INTEGRITY),
    ("archive", "ArchiveError", Category.INTERNAL),
    ("retrieval", "InvalidQuery", Category.INVALID_INPUT),
    ("retrieval", "InvalidDocument", Category.INVALID_INPUT),
    ("retrieval", "IndexLocked", Category.UNAVAILABLE),
    # An IndexUnavailable that waiting does not mend (a damaged model, a cache it cannot write).
    ("retrieval", "ModelExportError", Category.MISCONFIGURED),
    ("retrieval", "IndexUnavailable", Category.UNAVAILABLE),
    ("retrieval", "IndexConfigMismatch", Category.MISCONFIGURED),
    ("retrieval", "RetrievalError", Category.UNAVAILABLE),
)

UNEXPECTED_CODE = "internal_error"


@dataclass(frozen=True)
class Outcome:
    """How every surface answers one error. `code` is the error's stable code, the same on all
    of them: REST's problem `code`, MCP's `error`, the CLI's JSON `code`."""

    category: Category
    http_status: int
    exit_code: int
    code: str


def answer(category: Category, code: str) -> Outcome:
    """The outcome of `category`, for a failure a surface reports without an error class."""
    http_status, exit_code = _ANSWERS[category]
    return Outcome(category, http_status, exit_code, code)


def _errors_module(layer: str) -> str:
    """The module of a layer's errors (the archive keeps its own on its ground floor, rules)."""
    return "mnemo_sea.archive.rules.errors" if layer == "archive" else f"mnemo_sea.{layer}.errors"


def row_class(layer: str, name: str) -> type[BaseException] | None:
    """The class a row names, or None while its layer's errors module is not loaded."""
    module = sys.modules.get(_errors_module(layer))
    found = getattr(module, name, None)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def category_of(exc: BaseException) -> Category | None:
    """The category of a typed error; None for anything else (a bug, an OSError, ...)."""
    for layer, name, category in TABLE:
        cls = row_class(layer, name)
        if cls is not None and isinstance(exc, cls):
            return category
    return None


def outcome_of(exc: BaseException) -> Outcome:
    """How every surface answers `exc`: by its row, or as an unexpected internal error."""
    category = category_of(exc)
    if category is None:
        return answer(Category.INTERNAL, UNEXPECTED_CODE)
    return answer(category, str(getattr(exc, "code", UNEXPECTED_CODE)))


# ---- the way back: an answer's code and status -> the error class it was raised as -------------

# The layers whose `errors` module defines the typed errors a surface answers with (`row_class`'s
# naming: mnemo_sea.<layer>.errors). Errors defined elsewhere (reading files, eval traces) are
# the command line's own and never travel over a network surface.
ERROR_LAYERS = ("archive", "retrieval", "context", "system")


def error_classes() -> dict[str, type[BaseException]]:
    """Every error class of the loaded `errors` modules of ERROR_LAYERS, by its stable code."""
    found: dict[str, type[BaseException]] = {}
    for layer in ERROR_LAYERS:
        name = _errors_module(layer)
        module = sys.modules.get(name)
        for value in vars(module).values() if module is not None else ():
            code = getattr(value, "code", None)
            defined_here = isinstance(value, type) and value.__module__ == name
            if defined_here and issubclass(value, BaseException) and isinstance(code, str):
                found.setdefault(code, value)
    return found


def category_of_status(http_status: int) -> Category:
    """The category an HTTP status answers; of several (500), the last in the table above, the
    most general (`internal`); a status no category answers is `internal` too."""
    matching = [c for c, (status, _) in _ANSWERS.items() if status == http_status]
    return matching[-1] if matching else Category.INTERNAL


def general_class(category: Category) -> type[BaseException] | None:
    """The most general loaded class of `category`: its last row in the first layer that has
    one (rows go from the most specific to the most general), e.g. InvalidInput, StateConflict."""
    rows = [(layer, name) for layer, name, c in TABLE if c is category]
    if not rows:
        return None
    first_layer = rows[0][0]
    for layer, name in reversed(rows):
        cls = row_class(layer, name) if layer == first_layer else None
        if cls is not None:
            return cls
    return None


def error_class(code: str, http_status: int) -> type[BaseException]:
    """The class an answer (`code`, `http_status`) was raised as: the class of that code in the
    loaded errors modules of ERROR_LAYERS (the caller imports them: this module imports
    nothing); else, for an answer a surface gives without an error class of its own (REST's
    request validation, a body over the limit, a probe that is not ready, an unexpected
    error), the most general class of the status's category; ArchiveError's row at worst."""
    found = error_classes().get(code)
    if found is not None:
        return found
    general = general_class(category_of_status(http_status)) or general_class(Category.INTERNAL)
    if general is None:
        raise LookupError("mnemo_sea.archive.rules.errors is not loaded: no class can answer")
    return general


def rebuild(cls: type[BaseException], message: str, detail: Mapping[str, Any]) -> BaseException:
    """The error of class `cls` whose `to_dict()` gave `message` and `detail`, made without its
    constructor (each class has parameters of its own): the base's fields, then the attributes
    the class reads from its detail (`_restore`, see ArchiveError)."""
    exc = cls.__new__(cls)
    BaseException.__init__(exc, message)
    vars(exc).update(message=message, detail=dict(detail))
    restore = getattr(exc, "_restore", None)
    if callable(restore):
        restore()
    return exc
