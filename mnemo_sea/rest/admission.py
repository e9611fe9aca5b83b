"""Who runs next in the API's thread pool: every tenant gets its turn, none can take the pool.

The pool runs MNEMO_API_THREADS blocking requests at once (rest/threads.py). Before this, the
others waited in one first-come line, so six expensive requests of one tenant in front of it
held another tenant's 50 ms search for 50 s. Now each request of an authenticated caller asks
`TenantAdmission` for a slot, keyed by the tenant of its key, under three rules:

- at most `slots` requests run at once (the pool's size: an admitted request finds a thread);
- at most `per_tenant` of them are one tenant's (MNEMO_API_TENANT_THREADS), so the others
  always have threads left, whatever one tenant sends;
- a tenant's requests beyond that wait in a line of its own, at most `queue` of them
  (MNEMO_API_TENANT_QUEUE); one more is refused at once with `TooManyRequests` (REST: 429 and
  Retry-After), before any work, so nothing was read or changed.

When a slot frees, the tenants with a request waiting are served round-robin (the tenant
served last goes to the end of the ring), oldest request first within a tenant, skipping a
tenant at its share: one tenant's backlog never sits in front of another tenant's request.
A request that is cancelled while it waits (the client went away) leaves the line, and one
cancelled just after it was granted a slot gives the slot back.

Retry-After is the tenant's backlog (running and waiting) over its share, times the mean time
its recent requests held a slot (an exponentially weighted mean on `clock`, 1 s before any
finished), rounded up and kept within 1..60 s: how long its line needs to clear.

Everything here runs on the event loop, one coroutine at a time, so the counts need no lock.
The share is a count of threads, not of CPU: a process runs Python on one core, so a tenant's
requests at their share still take a part of the core the others' requests run on (see
docs/architecture.md, Surfaces, for the figures of `bench api --flood`).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

from mnemo_sea.system.errors import TooManyRequests

# The weight of the latest hold in a tenant's mean hold time: about the last ten requests count.
_HOLD_WEIGHT = 0.2
_FIRST_HOLD_S = 1.0
_RETRY_AFTER_S = (1, 60)
# The tenants whose mean hold is kept after their requests ended (the most recently seen).
_HOLDS_KEPT = 4096


@dataclass
class _Waiter:
    event: anyio.Event = field(default_factory=anyio.Event)
    granted: bool = False


@dataclass
class _Tenant:
    running: int = 0
    waiting: deque[_Waiter] = field(default_factory=deque)


@dataclass(frozen=True)
class TenantLoad:
    """What one tenant holds in the pool right now."""

    running: int
    waiting: int


class TenantAdmission:
    """Slots of the thread pool, shared between tenants by the rules of the module doc."""

    def __init__(
        self, slots: int, per_tenant: int, queue: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if slots < 1 or per_tenant < 1 or queue < 0:
            raise ValueError("slots and per_tenant must be at least 1, queue at least 0")
        self.slots = slots
        self.per_tenant = min(per_tenant, slots)
        self.queue = queue
        self._clock = clock
        self._running = 0
        self._tenants: dict[str, _Tenant] = {}
        # The tenants with a request waiting, in the order they are served next.
        self._ring: OrderedDict[str, None] = OrderedDict()
        # Each tenant's mean hold, kept while it is idle too: a tenant's next burst is refused
        # with what its last requests took, not with the first guess.
        self._mean_hold_s: OrderedDict[str, float] = OrderedDict()

    def load(self, tenant: str) -> TenantLoad:
        state = self._tenants.get(tenant)
        return TenantLoad(0, 0) if state is None else TenantLoad(state.running, len(state.waiting))

    @property
    def running(self) -> int:
        return self._running

    @asynccontextmanager
    async def slot(self, tenant: str) -> AsyncIterator[None]:
        """Hold one of `tenant`'s slots for the body of the `async with`; wait for it in the
        tenant's line. Raises TooManyRequests, before waiting, when the line is full."""
        state = self._tenants.setdefault(tenant, _Tenant())
        if not state.waiting and state.running < self.per_tenant and self._running < self.slots:
            self._grant(state)
        else:
            await self._wait(tenant, state)
        started = self._clock()
        try:
            yield
        finally:
            self._held(tenant, self._clock() - started)
            self._release(tenant, state)

    async def _wait(self, tenant: str, state: _Tenant) -> None:
        if len(state.waiting) >= self.queue:
            self._forget_if_idle(tenant, state)
            raise TooManyRequests(
                retry_after=self._retry_after(tenant, state),
                running=state.running,
                waiting=len(state.waiting),
            )
        waiter = _Waiter()
        state.waiting.append(waiter)
        self._ring.setdefault(tenant, None)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.granted:
                self._release(tenant, state)
            else:
                state.waiting.remove(waiter)
                if not state.waiting:
                    self._ring.pop(tenant, None)
                self._forget_if_idle(tenant, state)
            raise

    def _held(self, tenant: str, seconds: float) -> None:
        mean = self._mean_hold_s.pop(tenant, _FIRST_HOLD_S)
        self._mean_hold_s[tenant] = mean + _HOLD_WEIGHT * (seconds - mean)
        if len(self._mean_hold_s) > _HOLDS_KEPT:
            self._mean_hold_s.popitem(last=False)

    def _retry_after(self, tenant: str, state: _Tenant) -> int:
        backlog = state.running + len(state.waiting)
        mean = self._mean_hold_s.get(tenant, _FIRST_HOLD_S)
        seconds = math.ceil(backlog / self.per_tenant * mean)
        low, high = _RETRY_AFTER_S
        return max(low, min(high, seconds))

    def _grant(self, state: _Tenant) -> None:
        state.running += 1
        self._running += 1

    def _release(self, tenant: str, state: _Tenant) -> None:
        state.running -= 1
        self._running -= 1
        self._dispatch()
        self._forget_if_idle(tenant, state)

    def _dispatch(self) -> None:
        """Grant free slots to waiting requests, round-robin over the tenants below their share."""
        while self._running < self.slots:
            chosen = next((t for t in self._ring if self._tenants[t].running < self.per_tenant), None)
            if chosen is None:
                return
            state = self._tenants[chosen]
            waiter = state.waiting.popleft()
            self._grant(state)
            waiter.granted = True
            waiter.event.set()
            if state.waiting:
                self._ring.move_to_end(chosen)
            else:
                del self._ring[chosen]

    def _forget_if_idle(self, tenant: str, state: _Tenant) -> None:
        # Bounded by the tenants active right now, not by every tenant ever seen.
        if state.running == 0 and not state.waiting and self._tenants.get(tenant) is state:
            del self._tenants[tenant]
