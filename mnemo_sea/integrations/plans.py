"""An adapter's operation written once, as a plan of handle calls, run on a blocking or an awaited
handle: the shape of the REST client's plans (mnemo_sea/client/calls.py), one level up.

A plan is a generator that yields `HandleCall`s (an operation's name and arguments, the same on
every handle) and receives each one's result, or has the call's `MnemoError` thrown in where it
yielded, so it can answer a NotFound itself; what it returns is the operation's result.
`run_plan` calls a blocking handle; `arun_plan` awaits an async one, and runs the whole plan on a
blocking one in a worker thread (the in-process facade does SQL and embedding work the event loop
must not wait on). Every adapter (LangGraph store, Agents SDK session, memory tool, vector stores)
writes each operation once as a plan and runs it with these two.

Nothing here imports a framework or the facade.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mnemo_sea.errors import MnemoError
from mnemo_sea.integrations.handles import is_async_handle

T = TypeVar("T")


@dataclass(frozen=True)
class HandleCall:
    """One call of a handle's operation: `getattr(handle, name)(*args, **kwargs)`."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


Plan = Generator[HandleCall, Any, T]


def call(name: str, /, *args: Any, **kwargs: Any) -> Plan[Any]:
    """One handle call inside a plan: `found = yield from call("get_evidence", evidence_id)`."""
    return (yield HandleCall(name, args, kwargs))


LISTING_PAGE = 1_000  # items a listing call is asked for at a time


def every_item(name: str, /, *args: Any, **kwargs: Any) -> Plan[list[Any]]:
    """Every item of a paged listing (`list_evidence`, `list_memory_owners`, `facts`: each takes
    `limit` and `offset`), read LISTING_PAGE at a time from the first until a short page."""
    items: list[Any] = []
    while True:
        page = yield HandleCall(name, args, {**kwargs, "limit": LISTING_PAGE, "offset": len(items)})
        items += page
        if len(page) < LISTING_PAGE:
            return items


def run_plan(handle: object, plan: Plan[T]) -> T:
    """Run `plan` on a blocking handle; its result, or the error it let through. TypeError for
    an async handle: its coroutines need the caller's event loop (the adapter's async methods)."""
    if is_async_handle(handle):
        plan.close()
        raise TypeError(
            f"this adapter's handle ({type(handle).__name__}) is async: call the adapter's async "
            "methods, or give it a blocking handle (mnemo.as_(principal), MnemoClient)"
        )
    try:
        asked = next(plan)
        while True:
            try:
                result = getattr(handle, asked.name)(*asked.args, **asked.kwargs)
            except MnemoError as e:
                asked = plan.throw(e)
            else:
                asked = plan.send(result)
    except StopIteration as done:
        answer: T = done.value
        return answer


async def arun_plan(handle: object, plan: Plan[T]) -> T:
    """Run `plan` awaited: each call awaited on an async handle; on a blocking one, the whole
    plan in a worker thread."""
    if not is_async_handle(handle):
        return await asyncio.to_thread(run_plan, handle, plan)
    try:
        asked = next(plan)
        while True:
            try:
                result = await getattr(handle, asked.name)(*asked.args, **asked.kwargs)
            except MnemoError as e:
                asked = plan.throw(e)
            else:
                asked = plan.send(result)
    except StopIteration as done:
        answer: T = done.value
        return answer


__all__ = ["LISTING_PAGE", "HandleCall", "Plan", "arun_plan", "call", "every_item", "run_plan"]
