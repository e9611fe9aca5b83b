"""The ground floor of the typed errors: `MnemoError`, the base of every error the library raises
on purpose, and `Category`, the kind of failure an error is.

The archive's `ArchiveError` and the retrieval layer's `RetrievalError` both derive from
`MnemoError`, so code above them (the surfaces, the facade) names one base instead of a union of
the two. This module imports nothing of the project: it sits below both layers, which may not
import each other.

Each class states its `category` as it states its `code`, and a class that states none has its
parent's (by the MRO), so the category of an error is `type(exc).category`. A class whose
parents are of different categories must state its own (ArchiveConflict, both a BatchRejected
and a StateConflict, is a conflict): `__init_subclass__` refuses to define it otherwise, since
which parent the MRO lists first is no decision. How each surface answers a category (HTTP
status, exit code, MCP category) is mnemo_sea.system.outcomes' table.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


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


class MnemoError(Exception):
    """Base of every error the library raises on purpose (through a layer's base, never itself).

    `message` and `detail` are the whole error: the attributes a subclass offers (`field`,
    `targets`, ...) are read from `detail` by `_restore`, so an error rebuilt from its
    `to_dict()` (mnemo_sea.system.outcomes.rebuild, as the REST client does with a problem
    answer) is the same error. `request_id` names the REST request that answered it, when it
    came over HTTP (None in process).
    """

    code = "mnemo_error"
    category: ClassVar[Category] = Category.INTERNAL
    request_id: str | None = None

    def __init__(self, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.message = message
        self.detail: dict[str, Any] = detail
        self._restore()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "category" in vars(cls):
            return
        inherited = {base.category for base in cls.__bases__ if issubclass(base, MnemoError)}
        if len(inherited) > 1:
            raise TypeError(
                f"{cls.__qualname__} inherits the categories {sorted(inherited)} from its parents: "
                "state its own `category`"
            )

    def _restore(self) -> None:
        """Set the subclass's attributes from `self.detail` (nothing here)."""

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.detail}


__all__ = ["Category", "MnemoError"]
