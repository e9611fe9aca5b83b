"""An adapter's operation written once, as a plan of handle calls, run on a blocking or an awaited
handle: the shape of the REST client's plans (mnemo_sea/client/calls.py), one level up.

A plan is a generator that yields `HandleCall`s (an operation's name and arguments, the same on
every handle) and receives each one's result, or has the call's `MnemoError` thrown in where it
yielded, so it can answer a NotFound itself; what it returns is the operation's result.
`run_plan` calls a blocking handle; `arun_plan` awaits an async one.

Nothing here imports a framework or the facade.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mnemo_sea.errors import MnemoError

T = TypeVar("T")


@dataclass(frozen=True)
class HandleCall:
    """One call of a handle's operation: `getattr(handle, name)(*args, **kwargs)`."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


Plan = Generator[HandleCall, Any, T]


def run_plan(handle: object, plan: Plan[T]) -> T:
    """Run `plan` on a blocking handle; its result, or the error it let through."""
    try:
        call = next(plan)
        while True:
            try:
                result = getattr(handle, call.name)(*call.args, **call.kwargs)
            except MnemoError as e:
                call = plan.throw(e)
            else:
                call = plan.send(result)
    except StopIteration as done:
        answer: T = done.value
        return answer


async def arun_plan(handle: object, plan: Plan[T]) -> T:
    """Run `plan` on an async handle, awaiting each call."""
    try:
        call = next(plan)
        while True:
            try:
                result = await getattr(handle, call.name)(*call.args, **call.kwargs)
            except MnemoError as e:
                call = plan.throw(e)
            else:
                call = plan.send(result)
    except StopIteration as done:
        answer: T = done.value
        return answer


__all__ = ["HandleCall", "Plan", "arun_plan", "run_plan"]
