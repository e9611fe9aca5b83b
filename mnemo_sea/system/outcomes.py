"""The one table of how every surface answers each category of error.

Every error the library raises on purpose is a `mnemo_sea.errors.MnemoError` whose class states
its `category` (as it states its stable `code`), so an error's category is `exc.category`. This
module turns a category into its answers, ANSWERS: the REST status, the CLI exit code (the EXIT_*
constants) and the category MCP's error results name. `rest.problems`, `mcp.results`,
`cli.output` and the `mnemo-sea` commands all ask `outcome_of`; none keeps a mapping of its own.
The table and the EXIT_* constants are the statement of the exit codes; documents point here.

The way back, for a client of a surface (mnemo_sea.client): `error_class` finds the class of an
answer's code among the loaded subclasses of MnemoError, or for an answer without an error class
of its own the most general class of its status's category (`general_class`), and `rebuild`
makes the error again from its message and detail. Only loaded classes can be found: this
module imports no layer (a command that fails before it opens the index must not pay for
importing the retrieval layer), so the client imports the layers' `errors` modules.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from mnemo_sea.errors import Category, MnemoError

# The exit codes of the `mnemo-sea` commands. EXIT_PROBLEMS is also "a check ran and found
# problems" (fsck, verify-deleted), which no error is.
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_FORBIDDEN = 4
EXIT_CONFLICT = 5
EXIT_UNAVAILABLE = 6
EXIT_INTEGRITY = 7
# What only the command line meets, no error's category: `--partial` left input out (the good
# part is stored; a script must not take the run for a complete one), and stdout's reader went
# away (`| head`): the shell's status for a process stopped by SIGPIPE, 128 + 13.
EXIT_PARTIAL = 8
EXIT_CLOSED_PIPE = 141


@dataclass(frozen=True)
class Answers:
    """How the surfaces answer one category: REST's status, the CLI's exit code, and the
    `category` member of an MCP error result."""

    http_status: int
    exit_code: int
    mcp_category: str


# The REST statuses were the model. Where several categories share a status (500), the last is
# the most general: category_of_status reads the order.
ANSWERS: Mapping[Category, Answers] = {
    # The request is malformed, or a batch was rejected whole; nothing changed. Also a deletion
    # receipt or audit anchor this deployment cannot accept (the client's document).
    Category.INVALID_INPUT: Answers(422, EXIT_USAGE, "invalid_input"),
    # Content above the configured limit; nothing changed.
    Category.TOO_LARGE: Answers(413, EXIT_USAGE, "too_large"),
    # The settings a process runs with disagree with its stored data (an index built with another
    # embedder): the operator's to fix, and on the command line the operator is the one who ran it.
    Category.MISCONFIGURED: Answers(500, EXIT_USAGE, "misconfigured"),
    # No valid API key; on the command line a key is an option value like any other.
    Category.UNAUTHENTICATED: Answers(401, EXIT_USAGE, "unauthenticated"),
    # Not there, or not this tenant's: the same answer, so it is no oracle.
    Category.NOT_FOUND: Answers(404, EXIT_NOT_FOUND, "not_found"),
    # Role or clearance.
    Category.FORBIDDEN: Answers(403, EXIT_FORBIDDEN, "forbidden"),
    # The target's state forbids it, or an idempotency key was reused.
    Category.CONFLICT: Answers(409, EXIT_CONFLICT, "conflict"),
    # A store or index down or locked; nothing changed, retry later.
    Category.UNAVAILABLE: Answers(503, EXIT_UNAVAILABLE, "unavailable"),
    # The caller's tenant holds as many requests in the service as it may; nothing was done,
    # retry later (the service is up: not 503).
    Category.BUSY: Answers(429, EXIT_UNAVAILABLE, "busy"),
    # Stored bytes fail their hash, a broken audit chain, a corrupt file.
    Category.INTEGRITY: Answers(500, EXIT_INTEGRITY, "integrity"),
    # An error of no more specific category, or not a typed error at all (a bug).
    Category.INTERNAL: Answers(500, EXIT_PROBLEMS, "internal"),
}

UNEXPECTED_CODE = "internal_error"


@dataclass(frozen=True)
class Outcome:
    """How every surface answers one error. `code` is the error's stable code, the same on all
    of them: REST's problem `code`, MCP's `error`, the CLI's JSON `code`."""

    category: Category
    http_status: int
    exit_code: int
    code: str

    @property
    def mcp_category(self) -> str:
        return ANSWERS[self.category].mcp_category


def answer(category: Category, code: str) -> Outcome:
    """The outcome of `category`, for a failure a surface reports without an error class."""
    answers = ANSWERS[category]
    return Outcome(category, answers.http_status, answers.exit_code, code)


def mcp_category(category: Category) -> str:
    """The `category` member of an MCP error result of `category`."""
    return ANSWERS[category].mcp_category


def category_of(exc: BaseException) -> Category | None:
    """The category of a typed error; None for anything else (a bug, an OSError, ...)."""
    return exc.category if isinstance(exc, MnemoError) else None


def outcome_of(exc: BaseException) -> Outcome:
    """How every surface answers `exc`: by its category, or as an unexpected internal error."""
    if isinstance(exc, MnemoError):
        return answer(exc.category, exc.code)
    return answer(Category.INTERNAL, UNEXPECTED_CODE)


# ---- the way back: an answer's code and status -> the error class it was raised as -------------


def error_classes() -> Iterator[type[MnemoError]]:
    """Every loaded class below MnemoError (the layers' bases and their subclasses), once each
    (a class of two parents is reached from both)."""
    seen: set[type[MnemoError]] = set()
    pending = list(MnemoError.__subclasses__())
    while pending:
        cls = pending.pop()
        if cls not in seen:
            seen.add(cls)
            yield cls
            pending.extend(cls.__subclasses__())


def _depth(cls: type[MnemoError]) -> int:
    """How far `cls` is from the base: fewer ancestors is more general."""
    return len(cls.__mro__)


def class_of_code(code: str) -> type[MnemoError] | None:
    """The loaded class whose `code` is `code`. Some codes are shared (`invalid_document` is the
    retrieval layer's InvalidDocument and the file loader's DocumentError, `content_too_large`
    ContentTooLarge and FileTooLarge): the class nearest the base, the general one, answers it; a
    code two classes as near share names none, so the status's category decides."""
    named = [cls for cls in error_classes() if cls.code == code]
    if not named:
        return None
    nearest = min(map(_depth, named))
    found = [cls for cls in named if _depth(cls) == nearest]
    return found[0] if len(found) == 1 else None


def category_of_status(http_status: int) -> Category:
    """The category an HTTP status answers; of several (500), the last in ANSWERS, the most
    general (`internal`); a status no category answers is `internal` too."""
    matching = [c for c, answers in ANSWERS.items() if answers.http_status == http_status]
    return matching[-1] if matching else Category.INTERNAL


def general_class(category: Category) -> type[MnemoError] | None:
    """The most general loaded class of `category`, e.g. InvalidInput, StateConflict; None when
    no loaded class is of it.

    The rule: the class of the category nearest the base; of equally near ones, the one most
    classes of the category derive from (InvalidInput before BatchRejected or InvalidQuery,
    StoreUnavailable before IndexLocked). A layer's base (ArchiveError, RetrievalError) stands
    for its layer, not for a category: it answers only a category no other class is of
    (ArchiveError: internal), else RetrievalError, an unavailable index, would be the general
    unavailable store. The qualified name settles a tie, so the answer never depends on the
    order classes were loaded in.
    """
    of_category = [cls for cls in error_classes() if cls.category is category]
    layer_bases = set(MnemoError.__subclasses__())
    candidates = [cls for cls in of_category if cls not in layer_bases] or of_category
    if not candidates:
        return None

    def rank(cls: type[MnemoError]) -> tuple[int, int, str]:
        derived = sum(1 for other in of_category if issubclass(other, cls))
        return _depth(cls), -derived, f"{cls.__module__}.{cls.__qualname__}"

    return min(candidates, key=rank)


def error_class(code: str, http_status: int) -> type[MnemoError]:
    """The class an answer (`code`, `http_status`) was raised as: the loaded class of that code
    (the caller imports the layers' errors modules: this module imports none); else, for an
    answer a surface gives without an error class of its own (REST's request validation, a
    body over the limit, a probe that is not ready, an unexpected error), the most general class
    of the status's category; the most general internal one (ArchiveError) at worst."""
    found = class_of_code(code)
    if found is not None:
        return found
    general = general_class(category_of_status(http_status)) or general_class(Category.INTERNAL)
    if general is None:
        raise LookupError("no error class is loaded (import mnemo_sea.archive): no class can answer")
    return general


def rebuild(cls: type[MnemoError], message: str, detail: Mapping[str, Any]) -> MnemoError:
    """The error of class `cls` whose `to_dict()` gave `message` and `detail`, made without its
    constructor (each class has parameters of its own): the base's fields, then the attributes
    the class reads from its detail (`_restore`, see MnemoError)."""
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    exc.message = message
    exc.detail = dict(detail)
    exc._restore()
    return exc
