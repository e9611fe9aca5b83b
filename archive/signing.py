"""The deployment key: HMAC-SHA256 signatures on what the archive hands out as proof.

A deletion receipt and an audit anchor are statements *this deployment* makes ("I deleted X,
recorded as audit event N with hash H"; "tenant T's chain had reached event N with hash H").
Anyone who can write the archive's tables can recompute the audit chain's plain SHA-256
hashes, so those hashes alone prove nothing against a database-level attacker. The key lives
outside the archive's tables (a file next to the SQLite file, or a server setting), so such an
attacker can neither forge a receipt nor an anchor, and a chain rewritten or rewound under a
signed anchor no longer matches it.

The archive never decides where the key lives: the composition root passes a `ReceiptKey`
(`from_text`, `load`, `load_or_create`); without one an archive signs with an `ephemeral` key, whose
receipts verify only in the process that issued them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import InvalidInput, StoreUnavailable

MIN_SECRET_CHARS = 32
KEY_FILE_MODE = 0o600


def canonical_time(value: datetime) -> str:
    """One spelling per instant, so a receipt re-parsed by any client signs the same."""
    if value.tzinfo is None:
        return value.isoformat(timespec="microseconds")  # never what the archive issues: mismatches
    return value.astimezone(UTC).isoformat(timespec="microseconds")


class ReceiptKey:
    """A secret of at least 32 characters; `key_id` names it without revealing it."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < MIN_SECRET_CHARS:
            raise InvalidInput(
                "receipt_key",
                f"at least {MIN_SECRET_CHARS} characters (generate one with `openssl rand -hex 32`)",
            )
        self._secret = secret
        # A keyed id: it tells two deployments' receipts apart, and reveals nothing of the key.
        self.key_id = hmac.new(secret, b"mnemo-sea/key-id", hashlib.sha256).hexdigest()[:16]

    def __repr__(self) -> str:
        return f"ReceiptKey(key_id={self.key_id!r})"

    @classmethod
    def from_text(cls, text: str) -> ReceiptKey:
        return cls(text.strip().encode("utf-8"))

    @classmethod
    def ephemeral(cls) -> ReceiptKey:
        return cls(secrets.token_hex(32).encode("ascii"))

    @classmethod
    def load(cls, path: Path) -> ReceiptKey:
        """The key in `path`, which must exist: never created here, so a key several processes
        share is provisioned once, not made up by each process that misses the file.

        Raises StoreUnavailable when the file is missing or unreadable, InvalidInput when it
        holds fewer than 32 characters.
        """
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise StoreUnavailable(f"receipt key {path} is unreadable: {e}") from e
        return cls.from_text(text)

    @classmethod
    def load_or_create(cls, path: Path) -> ReceiptKey:
        """The key in `path`, created (random, mode 0600) if the file does not exist yet.

        Raises StoreUnavailable when the file cannot be read or created, InvalidInput when it
        holds fewer than 32 characters.
        """
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, KEY_FILE_MODE)
        except FileExistsError:
            pass
        except OSError as e:
            raise StoreUnavailable(f"receipt key {path} cannot be created: {e.strerror or e}") from e
        else:
            # O_EXCL: of two processes opening a new folder together, exactly one writes the key.
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(secrets.token_hex(32) + "\n")
                f.flush()
                os.fsync(f.fileno())
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise StoreUnavailable(f"receipt key {path} is unreadable: {e}") from e
        if not text.strip():
            # The creator is between open and write: wait for it rather than fail or overwrite.
            text = _wait_for_content(path)
        return cls.from_text(text)

    def sign(self, purpose: str, payload: Mapping[str, Any]) -> str:
        return hmac.new(self._secret, _message(purpose, payload), hashlib.sha256).hexdigest()

    def verify(self, purpose: str, payload: Mapping[str, Any], signature: str) -> bool:
        return hmac.compare_digest(self.sign(purpose, payload), signature)


def _message(purpose: str, payload: Mapping[str, Any]) -> bytes:
    # The purpose is signed too, so a receipt's signature can never pass as an anchor's.
    body = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return f"{purpose}\n{body}".encode()


def _wait_for_content(path: Path) -> str:
    import time

    for _ in range(200):
        time.sleep(0.01)
        text = path.read_text(encoding="utf-8")
        if text.strip():
            return text
    raise StoreUnavailable(f"receipt key {path} is empty")
