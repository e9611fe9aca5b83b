"""Strict JSON types: what a number, a boolean and a time are where a body is parsed.

REST and MCP parse request bodies in pydantic's lax Python mode, which would read `true` as 1,
`"1000"` as 1000 and `1700000000` as a time. The library refuses those (a typed InvalidInput),
so every surface does: integers and numbers are `StrictInt`/`StrictFloat` (an integer is a
number, a boolean or text is neither), booleans `StrictBool`, and times ISO-8601 text (or a
`datetime` from Python), never a number or numeric text read as a Unix time. Pydantic's own
strict mode is not used for times: in Python mode it refuses ISO text, which is what JSON has.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from pydantic import AwareDatetime, BeforeValidator, StrictBool, StrictFloat, StrictInt

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


def iso_text(value: object) -> object:
    """A time as JSON carries it: ISO-8601 text; a `datetime` passes (Python callers)."""
    if isinstance(value, datetime) or (isinstance(value, str) and _ISO_DATE.match(value)):
        return value
    raise ValueError("must be an ISO-8601 date and time, e.g. '2024-05-01T09:30:00Z'")


def no_bool(value: object) -> object:
    """JSON's `true` is not the number 1 (for types that parse numbers and names alike)."""
    if isinstance(value, bool):
        raise ValueError("must not be a boolean")
    return value


IsoTime = Annotated[AwareDatetime, BeforeValidator(iso_text)]
IsoTimeAny = Annotated[datetime, BeforeValidator(iso_text)]

__all__ = ["IsoTime", "IsoTimeAny", "StrictBool", "StrictFloat", "StrictInt", "iso_text", "no_bool"]
