"""The deployment key: HMAC-SHA256 signatures on what the archive hands out as proof.

A deletion receipt and an audit anchor are statements *this deployment* makes ("I deleted X,
recorded as audit event N with hash H"; "tenant T's chain had reached event N with hash H").
Anyone who can write the archive's tables can recompute the audit chain's plain SHA-256
hashes, so those hashes alone prove nothing against a database-level attacker. The key lives
outside the archive's tables (a file next to the SQLite file, or a server setting), so such an
attacker can neither forge a receipt nor an anchor, and a chain rewritten or rewound under a
signed anchor no longer matches it.

The archive never decides where the key lives: the composition root passes a `ReceiptKey`
(`from_text`, `load`); without one an archive signs with an `ephemeral` key, whose receipts verify
only in the process that issued them.

A key file is never made up on the way: `create` makes a new one (an archive's `init`, see
deployment_key.py) and `rotate` replaces it on purpose. A rotated key keeps the keys it replaced
in `<key file>.retired` (one secret per line, oldest first), for verifying only: what they signed
still verifies, nothing new is signed with them.
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

from ..rules.errors import InvalidInput, StoreUnavailable

MIN_SECRET_CHARS = 32
KEY_FILE_MODE = 0o600


def canonical_time(value: datetime) -> str:
    """One spelling per instant, so a receipt re-parsed by any client signs the same."""
    if value.tzinfo is None:
        return value.isoformat(timespec="microseconds")  # never what the archive issues: mismatches
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def retired_file(path: Path) -> Path:
    """Where the keys a rotation replaced are kept, beside the key file."""
    return path.with_name(path.name + ".retired")


class ReceiptKey:
    """A secret of at least 32 characters; `key_id` names it without revealing it. `retired`:
    the keys it replaced, that still verify what they signed (see `verifier`)."""

    def __init__(self, secret: bytes, retired: tuple[ReceiptKey, ...] = ()) -> None:
        if len(secret) < MIN_SECRET_CHARS:
            raise InvalidInput(
                "receipt_key",
                f"at least {MIN_SECRET_CHARS} characters (generate one with `openssl rand -hex 32`)",
            )
        self._secret = secret
        # A keyed id: it tells two deployments' receipts apart, and reveals nothing of the key.
        self.key_id = hmac.new(secret, b"mnemo-sea/key-id", hashlib.sha256).hexdigest()[:16]
        self.retired = tuple(k for k in retired if k.key_id != self.key_id)

    def verifier(self, key_id: str) -> ReceiptKey | None:
        """The key that checks a signature made by `key_id`: this one or a retired one; None
        for a key this deployment never had."""
        if key_id == self.key_id:
            return self
        return next((k for k in self.retired if k.key_id == key_id), None)

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
        """The key in `path`, which must exist, with the keys it replaced (`retired_file`):
        never created here, so a key several processes share is provisioned once, not made up
        by each process that misses the file.

        Raises StoreUnavailable when a file is missing or unreadable, InvalidInput when a key
        holds fewer than 32 characters.
        """
        text = _read(path)
        if not text.strip():
            # A new folder's creator is between open and write (`create`): wait for it.
            text = _wait_for_content(path)
        return cls(text.strip().encode("utf-8"), _retired(path))

    @classmethod
    def create(cls, path: Path) -> ReceiptKey | None:
        """A new random key written to `path` (mode 0600, synced), or None when the file exists
        already: of two processes creating it together exactly one writes it (O_EXCL).

        Raises StoreUnavailable when the file cannot be created.
        """
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, KEY_FILE_MODE)
        except FileExistsError:
            return None
        except OSError as e:
            raise StoreUnavailable(f"receipt key {path} cannot be created: {e.strerror or e}") from e
        secret = secrets.token_hex(32)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secret + "\n")
            f.flush()
            os.fsync(f.fileno())
        return cls(secret.encode("ascii"))

    @classmethod
    def rotate(cls, path: Path) -> tuple[ReceiptKey | None, ReceiptKey]:
        """Replace the key in `path` by a new random one; returns (the replaced key, or None
        when the file was missing; the new key, with every retired key).

        The replaced secret is appended to `retired_file(path)` (synced) before the new one
        takes its place in one rename, so a crash at any point leaves either key in force and
        the old one kept. The caller holds the archive's write lock (one rotation at a time).
        Raises StoreUnavailable when a file cannot be read or written.
        """
        old = cls.load(path) if path.exists() else None
        try:
            if old is not None:
                retired = retired_file(path)
                fd = os.open(retired, os.O_WRONLY | os.O_CREAT | os.O_APPEND, KEY_FILE_MODE)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(old._secret.decode("utf-8") + "\n")
                    f.flush()
                    os.fsync(f.fileno())
            fresh = path.with_name(f".{path.name}.{secrets.token_hex(4)}.new")
            fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, KEY_FILE_MODE)
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(secrets.token_hex(32) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(fresh, path)
        except OSError as e:
            raise StoreUnavailable(f"receipt key {path} cannot be rotated: {e.strerror or e}") from e
        return old, cls.load(path)

    def sign(self, purpose: str, payload: Mapping[str, Any]) -> str:
        return hmac.new(self._secret, _message(purpose, payload), hashlib.sha256).hexdigest()

    def verify(self, purpose: str, payload: Mapping[str, Any], signature: str) -> bool:
        return hmac.compare_digest(self.sign(purpose, payload), signature)


def _message(purpose: str, payload: Mapping[str, Any]) -> bytes:
    # The purpose is signed too, so a receipt's signature can never pass as an anchor's.
    body = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return f"{purpose}\n{body}".encode()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise StoreUnavailable(f"receipt key {path} is unreadable: {e}") from e


def _retired(path: Path) -> tuple[ReceiptKey, ...]:
    retired = retired_file(path)
    if not retired.exists():
        return ()
    return tuple(ReceiptKey.from_text(line) for line in _read(retired).splitlines() if line.strip())


def _wait_for_content(path: Path) -> str:
    import time

    for _ in range(200):
        time.sleep(0.01)
        text = _read(path)
        if text.strip():
            return text
    raise StoreUnavailable(f"receipt key {path} is empty")
