"""json_values_over counts a JSON text's values (commas and opening brackets outside strings)
without parsing it, exactly, whatever its strings hold and wherever its blocks split it."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from mnemo_sea.archive.rules.limits import JsonCap, json_values_over

# Strings rich in what a scan could mistake for structure: quotes, backslashes, commas, brackets.
tricky = st.text(alphabet=st.sampled_from(list('"\\,[]{}:a \u00e9\u4e2d')), max_size=12)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | tricky,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(tricky, inner, max_size=5),
    max_leaves=30,
)


def counted(value: Any) -> int:
    """The reference count, from the parsed value: each container's bracket and its commas."""
    if isinstance(value, list):
        return 1 + max(len(value) - 1, 0) + sum(counted(v) for v in value)
    if isinstance(value, dict):
        return 1 + max(len(value) - 1, 0) + sum(counted(v) for v in value.values())
    return 0


@given(values, st.booleans(), st.integers(min_value=1, max_value=9))
def test_the_count_is_exact_on_any_json_and_any_block_size(value: Any, ascii_only: bool, block: int) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only).encode()
    n = counted(value)
    assert not json_values_over(text, n, block=block)
    if n > 0:
        assert json_values_over(text, n - 1, block=block)


def test_structure_inside_strings_is_not_counted() -> None:
    text = json.dumps({"body": '[1, 2, {"a": 3}], "x\\", ' * 1000}).encode()
    assert not json_values_over(text, 1)
    ten = b"[" + b",".join([b"[]"] * 10) + b"]"  # 11 brackets and 9 commas
    assert json_values_over(ten, 19) and not json_values_over(ten, 20)


@given(values)
def test_a_fields_value_cap_counts_as_the_body_scan_does(value: Any) -> None:
    """JsonCap(values=n) walks the parsed value; json_values_over scans its text: one count."""
    n = counted(value)
    assert JsonCap(10**9, values=n).problem(value) is None
    if n > 0:
        problem = JsonCap(10**9, values=n - 1).problem(value)
        assert problem is not None and problem[0] == "json_too_large" and problem[2] == n - 1
