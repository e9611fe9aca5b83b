"""Who runs next in the API's thread pool: every tenant gets its turn, none can take the pool.

The pool runs MNEMO_API_THREADS blocking requests at once (rest/threads.py). Before this, the
others waited in one first-come line, so six expensive requests of one tenant in front of it
held another tenant's 50 ms search for 50 s. Now each request of an authenticated caller asks
`TenantAdmission` for a slot, keyed by the tenant of its key, under four rules:

- at most `slots` requests run at once (the pool's size: an admitted request finds a thread);
- at most `per_tenant` of them are one tenant's (MNEMO_API_TENANT_THREADS), so the others
  always have threads left, whatever one tenant sends;
- a tenant always may run one request, but a second one at once only while it has used no more
  than an equal part of the CPU of the tenants present (the CPU-weighted share below);
- a tenant's requests beyond that wait in a line of its own, at most `queue` of them
  (MNEMO_API_TENANT_QUEUE); one more is refused at once with `TooManyRequests` (REST: 429 and
  Retry-After), before any work, so nothing was read or changed.

Why CPU and not only threads: Python runs one thread at a time, so a tenant's share of threads
is not its share of the core. Two threads of a flooding tenant took two thirds of it, and each
time a light tenant's request gave the interpreter up for a database read it waited behind
them again: a 1-client tenant's search p99 grew 11x under a flood. So each tenant's CPU seconds
(measured on the thread that ran its request, `Turn.cpu_s`) are kept as a sum that halves every
`half_life_s`, and while two or more tenants are present (in the service, or seen within the
last `present_s`) a tenant whose sum is above the mean of theirs runs one request at a time.
Alone, or under its part, it runs up to `per_tenant`: the rule costs a lone tenant nothing,
and a flood that meets another tenant falls back to one thread, the one core's worth it would
get anyway (`bench api --flood`: figures in docs/architecture.md, Surfaces).

When a slot frees, the tenants with a request waiting are served round-robin (the tenant
served last goes to the end of the ring), oldest request first within a tenant, skipping a
tenant that may not run one more: one tenant's backlog never sits in front of another tenant's
request. A request that is cancelled while it waits (the client went away) leaves the line,
and one cancelled just after it was granted a slot gives the slot back.

Retry-After is the tenant's backlog (running and waiting) over its share, times the mean time
its recent requests held a slot (an exponentially weighted mean on `clock`, 1 s before any
finished), rounded up and kept within 1..60 s: how long its line needs to clear.

Everything here runs on the event loop, one coroutine at a time, so the counts need no lock.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

from mnemo_sea.system.errors import TooManyRequests
from mnemo_sea.system.wiring.settings import MnemoSettings

T = TypeVar("T")

# The weight of the latest hold in a tenant's mean hold time: about the last ten requests count.
_HOLD_WEIGHT = 0.2
_FIRST_HOLD_S = 1.0
_RETRY_AFTER_S = (1, 60)
# The tenants whose mean hold is kept after their requests ended (the most recently seen).
_HOLDS_KEPT = 4096
# A tenant's CPU seconds count half after this long; a tenant is present this long after its
# last request: a light tenant between two requests is still there when the next one comes.
_CPU_HALF_LIFE_S = 1.0
_PRESENT_S = 2.0


@dataclass
class _Waiter:
    event: anyio.Event = field(default_factory=anyio.Event)
    granted: bool = False


@dataclass
class _Tenant:
    running: int = 0
    waiting: deque[_Waiter] = field(default_factory=deque)


@dataclass
class Turn:
    """One admitted request: the CPU seconds its work took, set by whoever ran it."""

    cpu_s: float = 0.0


def charged(turn: Turn, work: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`work(*args, **kwargs)` run on this thread, the CPU seconds it took left on `turn` (run it
    in the pool: those are the seconds the tenant is charged)."""
    began = time.thread_time()
    try:
        return work(*args, **kwargs)
    finally:
        turn.cpu_s = time.thread_time() - began


@dataclass
class _Usage:
    """A present tenant's CPU seconds, decayed to `at`, and when it was last seen."""

    cpu_s: float = 0.0
    at: float = 0.0
    seen: float = 0.0


@dataclass(frozen=True)
class TenantLoad:
    """What one tenant holds in the pool right now."""

    running: int
    waiting: int


class TenantAdmission:
    """Slots of the thread pool, shared between tenants by the rules of the module doc."""

    def __init__(
        self,
        slots: int,
        per_tenant: int,
        queue: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        half_life_s: float = _CPU_HALF_LIFE_S,
        present_s: float = _PRESENT_S,
    ) -> None:
        if slots < 1 or per_tenant < 1 or queue < 0:
            raise ValueError("slots and per_tenant must be at least 1, queue at least 0")
        if half_life_s <= 0 or present_s <= 0:
            raise ValueError("half_life_s and present_s must be above 0")
        self.slots = slots
        self.per_tenant = min(per_tenant, slots)
        self.queue = queue
        self._clock = clock
        self._half_life_s = half_life_s
        self._present_s = present_s
        # The present tenants' CPU use, least recently seen first.
        self._usage: OrderedDict[str, _Usage] = OrderedDict()
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

    def recent_cpu_s(self, tenant: str) -> float:
        """The CPU seconds of `tenant`'s requests, each halved every half-life since it ended
        (0 for a tenant not present)."""
        now = self._clock()
        self._present(now)
        usage = self._usage.get(tenant)
        return 0.0 if usage is None else self._decayed(usage, now)

    @property
    def running(self) -> int:
        return self._running

    @asynccontextmanager
    async def slot(self, tenant: str) -> AsyncIterator[Turn]:
        """Hold one of `tenant`'s slots for the body of the `async with`; wait for it in the
        tenant's line. Raises TooManyRequests, before waiting, when the line is full. The body
        sets the CPU seconds its work took on the Turn it gets; the tenant is charged them."""
        state = self._tenants.setdefault(tenant, _Tenant())
        self._seen(tenant)
        if self._ring and self._running < self.slots:
            self._dispatch()  # the waiting may run now that others left: they go first
        free = not state.waiting and self._running < self.slots
        if free and self._may_run(tenant, state, self._mean_cpu() if state.running else None):
            self._grant(state)
        else:
            await self._wait(tenant, state)
        started = self._clock()
        turn = Turn()
        try:
            yield turn
        finally:
            self._held(tenant, self._clock() - started)
            self._charge(tenant, turn.cpu_s)
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
            while not waiter.event.is_set():
                # Whether a tenant may run more changes with time too (the others leave, its
                # CPU decays), not only when a slot frees: look again now and then.
                with anyio.move_on_after(self._present_s):
                    await waiter.event.wait()
                self._dispatch()
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
        # A tenant over its part of the CPU runs one request at a time, not its share.
        drains = self.per_tenant if self._within_cpu(tenant, self._mean_cpu()) else 1
        seconds = math.ceil(backlog / drains * mean)
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
        """Grant free slots to waiting requests, round-robin over the tenants that may run one more."""
        mean = self._mean_cpu()
        while self._running < self.slots:
            chosen = next((t for t in self._ring if self._may_run(t, self._tenants[t], mean)), None)
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

    def _may_run(self, tenant: str, state: _Tenant, mean_cpu: float | None) -> bool:
        """Whether one more request of `tenant` may run now (a free slot aside): its first always,
        more up to its share while it has used no more than an equal part of the present
        tenants' CPU (`mean_cpu`, from _mean_cpu)."""
        if state.running == 0:
            return True
        return state.running < self.per_tenant and self._within_cpu(tenant, mean_cpu)

    def _within_cpu(self, tenant: str, mean_cpu: float | None) -> bool:
        usage = self._usage.get(tenant)
        return mean_cpu is None or usage is None or self._decayed(usage, self._clock()) <= mean_cpu

    def _mean_cpu(self) -> float | None:
        """The mean of the present tenants' CPU seconds; None when fewer than two are present
        (alone, a tenant has no one to share with)."""
        now = self._clock()
        present = self._present(now)
        if len(present) < 2:
            return None
        return sum(self._decayed(u, now) for u in present) / len(present)

    def _present(self, now: float) -> list[_Usage]:
        """The usage of the tenants present: in the service, or seen within `present_s`. Those
        gone longer are forgotten, so this is bounded by the tenants active lately."""
        while self._usage:
            tenant, usage = next(iter(self._usage.items()))
            if now - usage.seen <= self._present_s:
                break
            if tenant in self._tenants:  # a long request: still there
                usage.seen = now
                self._usage.move_to_end(tenant)
            else:
                del self._usage[tenant]
        return list(self._usage.values())

    def _seen(self, tenant: str) -> None:
        now = self._clock()
        self._present(now)  # forgets the tenants gone, whatever path the requests take
        usage = self._usage.pop(tenant, None) or _Usage(at=now)
        usage.seen = now
        self._usage[tenant] = usage

    def _charge(self, tenant: str, cpu_s: float) -> None:
        now = self._clock()
        usage = self._usage.pop(tenant, None) or _Usage(at=now)
        usage.cpu_s = self._decayed(usage, now) + max(0.0, cpu_s)
        usage.at = usage.seen = now
        self._usage[tenant] = usage

    def _decayed(self, usage: _Usage, now: float) -> float:
        return usage.cpu_s * math.pow(0.5, (now - usage.at) / self._half_life_s)

    def _forget_if_idle(self, tenant: str, state: _Tenant) -> None:
        # Bounded by the tenants active right now, not by every tenant ever seen.
        if state.running == 0 and not state.waiting and self._tenants.get(tenant) is state:
            del self._tenants[tenant]


def admission_of(settings: MnemoSettings) -> TenantAdmission:
    """The shares the settings give: MNEMO_API_THREADS slots, MNEMO_API_TENANT_THREADS a tenant,
    MNEMO_API_TENANT_QUEUE waiting."""
    return TenantAdmission(settings.api_threads, settings.tenant_threads, settings.api_tenant_queue)
