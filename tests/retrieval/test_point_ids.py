"""Point ids are exactly uuid.uuid5 of the joined parts: ids already stored must keep matching."""

from __future__ import annotations

import copy
import pickle
import uuid

from hypothesis import given
from hypothesis import strategies as st

from mnemo_sea.retrieval.points import POINT_NAMESPACE, point_id

part = st.text(alphabet=st.characters(blacklist_characters="\x1f"), max_size=30)


@given(part, part, st.integers(1, 2**40), st.integers(0, 10_000))
def test_point_id_is_uuid5_of_the_joined_parts(tenant: str, evidence: str, version: int, chunk: int) -> None:
    ours = point_id(tenant, evidence, version, chunk)
    expected = uuid.uuid5(POINT_NAMESPACE, f"{tenant}\x1f{evidence}\x1f{version}\x1f{chunk}")
    assert ours == expected and hash(ours) == hash(expected)
    assert str(ours) == str(expected) and ours.bytes == expected.bytes
    assert ours.version == 5 and ours.variant == uuid.RFC_4122
    assert ours.is_safe == expected.is_safe


def test_a_point_id_behaves_as_any_uuid() -> None:
    pid = point_id("acme", "policy:1", 1, 0)
    assert pickle.loads(pickle.dumps(pid)) == pid
    assert copy.deepcopy(pid) == pid
    assert uuid.UUID(str(pid)) == pid
    assert {pid: 1}[uuid.UUID(str(pid))] == 1
