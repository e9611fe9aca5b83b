"""Who an agent-runtime adapter acts through: a *handle*, in process or over HTTP.

An adapter (the LangGraph store, the Agents SDK session, the memory tool, the vector stores) is
built on one handle and calls only the operations every handle has, with the facade's names and
keyword parameters and without the principal:

    blocking  `mnemo.as_(principal)` (MnemoAs)           or `MnemoClient(url, api_key=...)`
    awaited   `AsyncMnemo(mnemo, principal)`             or `AsyncMnemoClient(url, api_key=...)`

So the tenant is never an adapter's setting: it is the principal's (in process) or the API key's
(remote), and nothing a caller passes through a framework (a namespace, a session id, a path,
metadata) can name another tenant.

Nothing here imports a framework, the facade or the client (their types are named for the type
checker only), so an adapter's module loads only what its handle needs.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from mnemo_sea.client import AsyncMnemoClient, MnemoClient
    from mnemo_sea.system.acting import AsyncMnemo, MnemoAs

    Handle: TypeAlias = MnemoAs | MnemoClient
    AsyncHandle: TypeAlias = AsyncMnemo | AsyncMnemoClient

# (module, class) of each handle; looked up in sys.modules, never imported: a class whose module
# is not loaded cannot be the class of the value.
_BLOCKING = (("mnemo_sea.system.acting", "MnemoAs"), ("mnemo_sea.client.api", "MnemoClient"))
_AWAITED = (("mnemo_sea.system.acting", "AsyncMnemo"), ("mnemo_sea.client.api", "AsyncMnemoClient"))


def _is_one_of(value: object, classes: tuple[tuple[str, str], ...]) -> bool:
    for module_name, class_name in classes:
        module = sys.modules.get(module_name)
        if module is not None and isinstance(value, getattr(module, class_name)):
            return True
    return False


def is_async_handle(value: object) -> bool:
    return _is_one_of(value, _AWAITED)


def check_handle(value: object, adapter: str) -> Handle | AsyncHandle:
    """`value` if it is a handle; TypeError saying what to give instead. A `Mnemo` itself is
    refused by name: it acts as a principal, which the adapter must be given too."""
    facade = sys.modules.get("mnemo_sea.system.mnemo")
    if facade is not None and isinstance(value, facade.Mnemo):
        raise TypeError(
            f"{adapter} needs a handle acting as a principal, not a Mnemo: pass mnemo.as_(principal) "
            "(or AsyncMnemo(mnemo, principal)), or a MnemoClient"
        )
    if _is_one_of(value, _BLOCKING) or _is_one_of(value, _AWAITED):
        return value  # type: ignore[return-value]
    raise TypeError(
        f"{adapter} needs a handle: mnemo.as_(principal), AsyncMnemo(mnemo, principal), MnemoClient or "
        f"AsyncMnemoClient; got {type(value).__name__}"
    )


def check_blocking_handle(value: object, adapter: str) -> Handle:
    """A blocking handle; TypeError for an async one (its coroutines need the caller's loop)."""
    handle = check_handle(value, adapter)
    if is_async_handle(handle):
        raise TypeError(
            f"{adapter} needs a blocking handle (mnemo.as_(principal) or MnemoClient), got "
            f"{type(handle).__name__}"
        )
    return handle  # type: ignore[return-value]


__all__ = ["check_blocking_handle", "check_handle", "is_async_handle"]
