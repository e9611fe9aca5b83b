"""When the client sends a request again, and how long it waits first.

A request marked `retry` (a read, or a write under an idempotency key) is sent again, at most
`RetryPolicy.retries` more times, after

- a 503 with Retry-After: the server's word that nothing was done and when to come back; the
  wait is the Retry-After (seconds, or an HTTP date), cut to `max_delay`;
- a 429 with Retry-After (`too_many_requests`: the caller's tenant had as many requests in the
  server as it may): the same wait. This one is sent again even when it is not marked `retry`:
  the server refused it before any work, so a write without an idempotency key is not doubled;
- a network failure (no connection, a timeout, a connection lost before the answer): after
  `backoff`, doubled each time, cut to `max_delay`.

Anything else is answered at once: a success (a BadAnswer when it is not JSON or is a problem
in a success's clothes), a problem (raised as its typed error), a 503 or 429 without
Retry-After, or any other failure of a request not marked `retry`. `Attempts` is the one
decision both clients follow; each only sleeps its own way (time.sleep, asyncio.sleep).
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass

import httpx

from mnemo_sea.client.errors import error_of, success_of, unreachable
from mnemo_sea.client.wire import Reply, Request


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long: `retries` attempts after the first (0: never again), each wait at
    most `max_delay` seconds, the first wait after a network failure `backoff` seconds."""

    retries: int = 2
    max_delay: float = 5.0
    backoff: float = 0.2

    def __post_init__(self) -> None:
        if self.retries < 0 or self.max_delay < 0 or self.backoff < 0:
            raise ValueError("retries, max_delay and backoff must not be negative")

    def retry_after(self, value: str) -> float | None:
        """The wait a Retry-After value asks for, cut to `max_delay`; None if it is unreadable."""
        value = value.strip()
        if value.isdigit():
            wait = float(value)
        else:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                return None
            wait = float(when.timestamp()) - time.time()
        return min(max(wait, 0.0), self.max_delay)

    def after_failure(self, attempt: int) -> float:
        """The wait after the `attempt`-th failed attempt (1, 2, ...)."""
        return min(self.backoff * 2.0 ** (attempt - 1), self.max_delay)


class Attempts:
    """The attempts of one request: after each answer or failure, the Reply to hand back, or the
    seconds to wait before sending it again; raises the typed error when neither."""

    def __init__(self, policy: RetryPolicy, request: Request, url: str) -> None:
        self.policy = policy
        self.request = request
        self.url = url
        self.made = 0

    def _may_retry(self, *, refused_before_any_work: bool = False) -> bool:
        return (self.request.retry or refused_before_any_work) and self.made <= self.policy.retries

    def answered(self, response: httpx.Response) -> Reply | float:
        self.made += 1
        reply = Reply.of(response, self.request.operation)
        busy = reply.status == 429
        if (
            reply.status in (429, 503)
            and reply.retry_after is not None
            and self._may_retry(refused_before_any_work=busy)
        ):
            wait = self.policy.retry_after(reply.retry_after)
            if wait is not None:
                return wait
        if reply.ok:
            return success_of(reply, self.request)
        if reply.problem_code in self.request.passthrough:
            return reply
        raise error_of(reply, self.request)

    def failed(self, error: httpx.TransportError) -> float:
        self.made += 1
        if self._may_retry():
            return self.policy.after_failure(self.made)
        # Nothing reached the server when the connection itself could not be made.
        sent = not isinstance(error, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
        raise unreachable(self.url, self.request, error, sent=sent) from error


__all__ = ["Attempts", "RetryPolicy"]
