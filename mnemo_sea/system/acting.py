"""`Mnemo.as_(principal)`: the facade with the caller bound, so each call names what it does and
not again who does it, the way `MnemoClient` reads (its API key is the principal).

Every method of `Mnemo` that takes the principal first is here under its name, with the same
parameters after it and the same types (each is derived from the facade's own method, not
written again), so code moves between the library and the client unchanged. A test checks that
no such method of `Mnemo` is missing.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from mnemo_sea.archive import Principal
from mnemo_sea.system.mnemo import Mnemo  # the facade imports this module only when asked (as_)

P = ParamSpec("P")
R = TypeVar("R")


def _bound(method: Callable[Concatenate[Mnemo, Principal, P], R]) -> Callable[Concatenate[MnemoAs, P], R]:
    """`MnemoAs.<name>`: `Mnemo.<name>` of the handle's facade, as the handle's principal."""
    name = method.__name__

    @functools.wraps(method)
    def call(self: MnemoAs, /, *args: P.args, **kwargs: P.kwargs) -> R:
        run: Callable[Concatenate[Principal, P], R] = getattr(self.mnemo, name)
        return run(self.principal, *args, **kwargs)

    call.__qualname__ = f"MnemoAs.{name}"
    # What help() and editors show: the facade's parameters without the principal.
    shown = inspect.signature(method)
    call.__signature__ = shown.replace(  # type: ignore[attr-defined]
        parameters=[p for p in shown.parameters.values() if p.name != "principal"]
    )
    return call


class MnemoAs:
    """The facade acting as one principal: `mnemo.as_(agent).record(session, tool, content)`."""

    def __init__(self, mnemo: Mnemo, principal: Principal) -> None:
        self.mnemo = mnemo
        self.principal = principal

    def __repr__(self) -> str:
        return f"MnemoAs({self.principal.subject!r} in tenant {self.principal.tenant_id!r})"

    record = _bound(Mnemo.record)
    archive_results = _bound(Mnemo.archive_results)
    live_view = _bound(Mnemo.live_view)
    recover = _bound(Mnemo.recover)
    get_result = _bound(Mnemo.get_result)
    list_sessions = _bound(Mnemo.list_sessions)
    list_results = _bound(Mnemo.list_results)
    curate = _bound(Mnemo.curate)
    recall = _bound(Mnemo.recall)
    context = _bound(Mnemo.context)
    ingest = _bound(Mnemo.ingest)
    put_evidence = _bound(Mnemo.put_evidence)
    get_evidence = _bound(Mnemo.get_evidence)
    evidence_history = _bound(Mnemo.evidence_history)
    retract = _bound(Mnemo.retract)
    search = _bound(Mnemo.search)
    check_citations = _bound(Mnemo.check_citations)
    create_summary = _bound(Mnemo.create_summary)
    get_summary = _bound(Mnemo.get_summary)
    remember = _bound(Mnemo.remember)
    current = _bound(Mnemo.current)
    memory_history = _bound(Mnemo.memory_history)
    forget = _bound(Mnemo.forget)
    purge_expired = _bound(Mnemo.purge_expired)
    update_task_state = _bound(Mnemo.update_task_state)
    task_state = _bound(Mnemo.task_state)
    task_state_history = _bound(Mnemo.task_state_history)
    delete_session = _bound(Mnemo.delete_session)
    delete_evidence = _bound(Mnemo.delete_evidence)
    delete_owner = _bound(Mnemo.delete_owner)
    verify_deleted = _bound(Mnemo.verify_deleted)
