"""What `record` checks of a tool result, under the archive's own caps, for a caller to run on a
whole batch before its first write (an adapter recording a batch one result at a time).

Apart from checks.py, which takes its limits as arguments, so that the storage layer's schema
(which reads column sizes from checks.py) does not stand on the limits table too.
"""

from __future__ import annotations

from collections.abc import Mapping

from .checks import arguments_json, check_tool_name, content_bytes
from .errors import ContentTooLarge, InvalidInput
from .limits import ARGUMENTS_BYTES, CONTENT_BYTES, TOOL_NAME_CHARS


def arguments_fit(arguments: Mapping[str, object]) -> bool:
    """Whether `record` takes these arguments under the archive's own cap on their size
    (ARGUMENTS_BYTES of JSON, as `arguments_json` writes it): for an adapter deciding, before
    it writes, whether a call's arguments can be kept with its result. InvalidInput when they
    are not JSON."""
    try:
        arguments_json(arguments, ARGUMENTS_BYTES)
    except ContentTooLarge:
        return False
    return True


def check_tool_result(
    tool_name: object,
    content: object,
    *,
    media_type: str | None = None,
    arguments: object = None,
    where: str = "",
) -> None:
    """InvalidInput (ContentTooLarge for a size) when `record` would refuse a result of these
    values under the archive's own caps; a deployment's policy may set lower ones, which
    `record` itself refuses. For an adapter that records a batch one result at a time: it
    checks every item with this before its first write. `where` names the item in the error's
    field (`items[3]` gives `items[3].tool_name`)."""
    try:
        check_tool_name(tool_name, TOOL_NAME_CHARS)
        content_bytes(content, media_type, CONTENT_BYTES)
        arguments_json(arguments, ARGUMENTS_BYTES)
    except ContentTooLarge as e:
        if not where:
            raise
        raise ContentTooLarge(f"{where}.{e.field}", e.size, e.limit) from None
    except InvalidInput as e:
        if not where:
            raise
        raise InvalidInput(f"{where}.{e.field}", e.problem) from None


__all__ = ["arguments_fit", "check_tool_result"]
