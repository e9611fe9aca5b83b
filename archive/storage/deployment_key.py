"""The deployment key's life: made once with its archive, replaced only on purpose, never made up.

A SQLite archive's key is the file `receipt.key` beside it (signing.py says what it signs). Its
invariants:

- It is created when its archive is (`init_key`, which `Archive.open` runs on a database file
  that did not exist yet): the first open of a new folder is its `init`. The key is written
  before the database, so a folder never holds an archive that had no key; a first open that
  fails removes the files it made, key included, so the folder is new again.
- An existing archive whose key file is gone is refused (`ReceiptKeyMissing`: by `Archive.open`
  before the database is opened, or by the store's `receipt_key` if the file goes while open),
  never given a new key: that one would reject every earlier receipt and anchor as another
  deployment's. The refusal writes no audit event.
- `rotate_key` replaces the key on purpose and keeps the replaced one for verifying only, so
  what it signed still verifies.
- Each creation and rotation is an audit event of the deployment's own chain (`DEPLOYMENT_CHAIN`,
  a name no tenant can have), actor `operator`, target `receipt_key:<key_id>`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from .audit import append_event
from .signing import ReceiptKey
from .store import ArchiveStore

log = logging.getLogger(__name__)

DEPLOYMENT_CHAIN = "_deployment"  # tenant ids start with a letter or digit: never a tenant's chain
OPERATOR = "operator"
CREATE_ACTION = "receipt_key_create"
ROTATE_ACTION = "receipt_key_rotate"


@dataclass(frozen=True)
class Rotation:
    """What `rotate_key` did: the new key's id, the replaced one's (None: its file was missing,
    so nothing it signed can be verified any more), and the audit event that records it."""

    key_id: str
    previous_key_id: str | None
    retired_key_ids: tuple[str, ...]
    audit_seq: int

    def to_dict(self) -> dict[str, object]:
        return {
            "key_id": self.key_id,
            "previous_key_id": self.previous_key_id,
            "previous_key_kept": self.previous_key_id is not None,
            "retired_key_ids": list(self.retired_key_ids),
            "audit_chain": DEPLOYMENT_CHAIN,
            "audit_seq": self.audit_seq,
        }


def create_key_file(path: Path) -> ReceiptKey | None:
    """A new archive's key, written to `path` before its database is created; None when the file
    exists already (another process creating the same folder won, or the key outlived its
    archive file). Raises StoreUnavailable when it cannot be written: nothing is created then."""
    return ReceiptKey.create(path)


def record_created(store: ArchiveStore, key: ReceiptKey, path: Path) -> int:
    """Audit the creation of `key` (created by `create_key_file`) in the deployment's chain."""
    with store.write() as conn:
        seq = append_event(
            conn, DEPLOYMENT_CHAIN, OPERATOR, CREATE_ACTION, f"receipt_key:{key.key_id}", {"file": path.name}
        )
    log.info("deployment key %s created in %s (audit event %s)", key.key_id, path, seq)
    return seq


def rotate_key(store: ArchiveStore, path: Path) -> Rotation:
    """Replace the key in `path` by a new one, keep the replaced one for verification
    (signing.ReceiptKey.rotate), and audit it, under the archive's write lock; from now on
    `store` signs with the new key. Other processes sign with the old one until they reopen.

    The files change inside the transaction that holds the lock, then the event is appended: a
    failed file change writes no event and leaves the old key in force; an event that then
    fails to commit leaves the rotation made (the old key kept, nothing lost) but unaudited,
    and the error is raised. Raises StoreUnavailable when a file cannot be read or written.
    """
    with store.write() as conn:
        old, new = ReceiptKey.rotate(path)
        previous = None if old is None else old.key_id
        seq = append_event(
            conn,
            DEPLOYMENT_CHAIN,
            OPERATOR,
            ROTATE_ACTION,
            f"receipt_key:{new.key_id}",
            {"file": path.name, "previous_key_id": previous, "previous_key_kept": old is not None},
        )
    store.use_receipt_key(new)
    return Rotation(new.key_id, previous, tuple(k.key_id for k in new.retired), seq)
