from __future__ import annotations

import pytest

from mnemo_sea.archive import Principal, Role, Sensitivity


@pytest.fixture
def agent() -> Principal:
    return Principal("clinic-a", "agent-1", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)


@pytest.fixture
def admin() -> Principal:
    return Principal("clinic-a", "admin-1", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)


@pytest.fixture
def other_tenant() -> Principal:
    return Principal("shop-b", "agent-9", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
