"""`starts_with`: the SQL of "this id starts with that prefix", literal and case-sensitive on
every backend.

A prefix is the caller's text, not a pattern: `kb_%` lists ids starting with those three
characters, never every id starting with `kb` and any one character. So LIKE's wildcards and
its escape character are escaped (SQLAlchemy's `autoescape`). SQLite's LIKE still ignores ASCII
case, so a comparison of the id's first characters with the prefix decides exactly; the LIKE
stays as the form a database can plan with an index where one fits.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, func


def starts_with(column: ColumnElement[Any], prefix: str) -> ColumnElement[bool]:
    """`column` starts with `prefix`, character for character (`prefix` non-empty)."""
    return and_(column.startswith(prefix, autoescape=True), func.substr(column, 1, len(prefix)) == prefix)
