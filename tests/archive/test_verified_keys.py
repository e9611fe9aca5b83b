"""The verified-key cache: what it spares (the key-table read) and what it must not weaken
(revocation within its bound, at once in the same process; no key answered as another)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import event, update

from mnemo_sea.archive import Archive, Principal, Role, Sensitivity, Unauthenticated
from mnemo_sea.archive.features.api_keys import authenticate, cached_principal, create_key, revoke_key
from mnemo_sea.archive.rules.clock import utcnow
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage.verified_keys import VerifiedKeys

TTL = 5.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[Archive]:
    opened = Archive.open(str(tmp_path / "archive.db"))
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cache(clock: Clock) -> VerifiedKeys:
    return VerifiedKeys(TTL, clock=clock)


def _key(archive: Archive, tenant: str = "clinic-a", subject: str = "agent-1") -> str:
    return create_key(archive.store, tenant_id=tenant, subject=subject, roles=["agent"])[0]


def _key_id(key: str) -> str:
    return key.split("_")[1]


def _revoke_elsewhere(archive: Archive, key: str) -> None:
    """What another process's `mnemo-sea keys revoke` leaves in the table (this process's caches
    hear nothing of it)."""
    with archive.store.write() as conn:
        conn.execute(
            update(t.api_keys).where(t.api_keys.c.key_id == _key_id(key)).values(revoked_at=utcnow())
        )


def _statements(archive: Archive) -> list[str]:
    seen: list[str] = []
    event.listen(archive.store.engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    return seen


def test_a_verified_key_is_answered_without_reading_the_key_table(
    archive: Archive, cache: VerifiedKeys
) -> None:
    key = _key(archive)
    first = authenticate(archive.store, key, cache=cache)
    seen = _statements(archive)
    again = authenticate(archive.store, key, cache=cache)
    assert again == first == Principal("clinic-a", "agent-1", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
    assert seen == []
    assert cached_principal(key, cache) == first


def test_a_key_revoked_elsewhere_is_refused_once_the_bound_has_passed(
    archive: Archive, cache: VerifiedKeys, clock: Clock
) -> None:
    key = _key(archive)
    authenticate(archive.store, key, cache=cache)
    _revoke_elsewhere(archive, key)
    clock.now += TTL - 0.01  # the stated bound: accepted at most TTL seconds after the check
    assert authenticate(archive.store, key, cache=cache).subject == "agent-1"
    clock.now += 0.01
    assert cached_principal(key, cache) is None
    with pytest.raises(Unauthenticated):
        authenticate(archive.store, key, cache=cache)
    # And it stays refused: failures are not cached, every later try reads the table again.
    clock.now += 100 * TTL
    with pytest.raises(Unauthenticated):
        authenticate(archive.store, key, cache=cache)
    assert len(cache) == 0


def test_a_key_revoked_in_this_process_is_refused_at_once_by_every_cache(archive: Archive) -> None:
    key = _key(archive)
    caches = [VerifiedKeys(TTL), VerifiedKeys(TTL)]
    for c in caches:
        authenticate(archive.store, key, cache=c)
    revoke_key(archive.store, _key_id(key))
    for c in caches:
        assert cached_principal(key, c) is None
        with pytest.raises(Unauthenticated):
            authenticate(archive.store, key, cache=c)


def test_a_check_that_began_before_a_revocation_here_is_not_kept(
    archive: Archive, cache: VerifiedKeys
) -> None:
    key = _key(archive)
    principal = authenticate(archive.store, key)  # what a read that began before it saw
    check = cache.begin()
    revoke_key(archive.store, _key_id(key))
    cache.put(_key_id(key), "ignored", principal, check)
    assert len(cache) == 0


def test_a_cached_key_id_with_another_secret_is_refused_and_keys_never_mix(
    archive: Archive, cache: VerifiedKeys
) -> None:
    mine = _key(archive, "clinic-a", "agent-1")
    theirs = _key(archive, "shop-b", "agent-9")
    assert authenticate(archive.store, mine, cache=cache).tenant_id == "clinic-a"
    assert authenticate(archive.store, theirs, cache=cache).tenant_id == "shop-b"
    forged = f"msk_{_key_id(mine)}_{theirs.split('_', 2)[2]}"  # my id, their secret
    assert cached_principal(forged, cache) is None
    with pytest.raises(Unauthenticated):
        authenticate(archive.store, forged, cache=cache)
    assert authenticate(archive.store, mine, cache=cache).tenant_id == "clinic-a"
    assert authenticate(archive.store, theirs, cache=cache).subject == "agent-9"


def test_without_a_bound_every_request_reads_the_table(archive: Archive) -> None:
    cache = VerifiedKeys(0)
    key = _key(archive)
    authenticate(archive.store, key, cache=cache)
    assert len(cache) == 0
    _revoke_elsewhere(archive, key)
    with pytest.raises(Unauthenticated):
        authenticate(archive.store, key, cache=cache)


def test_the_cache_keeps_at_most_its_size_least_recently_used_first(archive: Archive, clock: Clock) -> None:
    cache = VerifiedKeys(TTL, max_entries=2, clock=clock)
    a, b, c = (_key(archive, subject=s) for s in ("a", "b", "c"))
    for key in (a, b):
        authenticate(archive.store, key, cache=cache)
    assert cached_principal(a, cache) is not None  # a is now the most recently used
    authenticate(archive.store, c, cache=cache)
    assert len(cache) == 2
    assert cached_principal(b, cache) is None
    assert cached_principal(a, cache) is not None and cached_principal(c, cache) is not None


@pytest.mark.parametrize("ttl", [-1.0, float("nan")])
def test_a_bad_bound_is_refused(ttl: float) -> None:
    with pytest.raises(ValueError, match="ttl_s"):
        VerifiedKeys(ttl)
