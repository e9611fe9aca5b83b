"""Who is asking: the principal, its roles and its clearance.

The tenant of every operation comes from the principal, never from a request body: this
module is the only place that turns a principal into permission decisions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import TYPE_CHECKING, Any, Literal

from .errors import Forbidden, InvalidInput

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
    from pydantic.json_schema import JsonSchemaValue
    from pydantic_core import CoreSchema

SensitivityName = Literal["public", "internal", "confidential", "restricted"]


class Sensitivity(IntEnum):
    """How sensitive a record is; a principal reads up to its clearance."""

    PUBLIC = 0
    INTERNAL = 1
    CONFIDENTIAL = 2
    RESTRICTED = 3

    @classmethod
    def parse(cls, value: Sensitivity | str | int) -> Sensitivity:
        if isinstance(value, Sensitivity):
            return value
        try:
            if isinstance(value, int):
                return cls(value)
            return cls[value.strip().upper()]
        except (KeyError, ValueError, TypeError, AttributeError):
            names = ", ".join(m.name.lower() for m in cls)
            raise InvalidInput("sensitivity", f"{value!r} is not one of {names}") from None

    # Every surface publishes and prints a sensitivity by its name (REST, MCP, CLI alike): these
    # hooks make pydantic parse one as `parse` does (names in any case; numbers still parse, for
    # callers written before names were the vocabulary) and write and describe it by name.
    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        from pydantic_core import core_schema

        def validate(value: Any) -> Sensitivity:
            try:
                return cls.parse(value)
            except InvalidInput as e:
                raise ValueError(e.problem) from None

        return core_schema.no_info_plain_validator_function(
            validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda s: s.name.lower(), when_used="json"
            ),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string", "enum": [m.name.lower() for m in cls]}


class Role(StrEnum):
    """What a principal may do inside its tenant.

    reader: read and search; agent: also record, archive, recover and remember for any owner;
    admin: also delete, verify audits and manage keys.
    """

    READER = "reader"
    AGENT = "agent"
    ADMIN = "admin"


_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")


def check_identifier(field_name: str, value: object, pattern: re.Pattern[str] = _ID) -> str:
    """Validate a caller-given identifier (tenant, subject, session, owner)."""
    if not isinstance(value, str):
        raise InvalidInput(field_name, f"must be a string, got {type(value).__name__}")
    if not pattern.fullmatch(value):
        shown = value if len(value) <= 60 else value[:60] + "..."
        raise InvalidInput(
            field_name,
            f"{shown!r} is not a valid identifier (1-128 chars: letters, digits and . _ : @ -, "
            "starting with a letter or digit)",
        )
    return value


_ROLE_RANK = {Role.READER: 0, Role.AGENT: 1, Role.ADMIN: 2}


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: tenant, subject (user or agent), roles and clearance."""

    tenant_id: str
    subject: str
    roles: frozenset[Role] = field(default_factory=lambda: frozenset({Role.AGENT}))
    clearance: Sensitivity = Sensitivity.INTERNAL

    def __post_init__(self) -> None:
        check_identifier("tenant_id", self.tenant_id)
        check_identifier("subject", self.subject)
        object.__setattr__(self, "roles", frozenset(Role(r) for r in self.roles))
        object.__setattr__(self, "clearance", Sensitivity.parse(self.clearance))

    def has(self, role: Role) -> bool:
        # admin implies agent implies reader; asked several times per search, and per hit
        return any(_ROLE_RANK[r] >= _ROLE_RANK[role] for r in self.roles)

    def require(self, role: Role, action: str) -> None:
        if not self.has(role):
            raise Forbidden(
                f"{action} needs the {role.value} role; principal {self.subject!r} has "
                f"{sorted(r.value for r in self.roles) or 'none'}",
                needed_role=role.value,
            )

    def may_read_originals(self) -> bool:
        """Whether this principal may read archived originals (and their pages in search): an
        agent's own working material, not a reader's, so agents and admins only."""
        return self.has(Role.AGENT)

    def can_read(self, sensitivity: Sensitivity) -> bool:
        return sensitivity <= self.clearance

    def require_clearance(self, sensitivity: Sensitivity, action: str) -> None:
        if not self.can_read(sensitivity):
            raise Forbidden(
                f"{action} needs clearance {sensitivity.name.lower()}; principal {self.subject!r} "
                f"has {self.clearance.name.lower()}",
                needed_clearance=sensitivity.name.lower(),
            )

    def may_act_for(self, owner: str) -> bool:
        """A user acts for itself; agents and admins act for any owner in the tenant."""
        return owner == self.subject or self.has(Role.AGENT)

    def require_owner(self, owner: str | None, action: str) -> None:
        """Forbidden unless this principal may act for `owner` (`may_act_for`; None: no owner)."""
        if owner is not None and not self.may_act_for(owner):
            raise Forbidden(f"{action}: {self.subject!r} may not act for owner {owner!r}", owner=owner)

    def may_read(self, sensitivity: int, owner: str | None) -> bool:
        """The one access rule of every archive read: data of `sensitivity` (a stored level; one
        outside the scale is readable by no one) about `owner` (None: no owner) is readable when
        the clearance covers the level and this principal acts for the owner. Asked for every hit
        of every search, so it builds nothing."""
        return 0 <= sensitivity <= self.clearance and (owner is None or self.may_act_for(owner))
