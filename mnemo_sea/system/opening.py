"""Opening the system a long-running surface (`serve`, `mcp`, `worker`) runs on, from settings."""

from __future__ import annotations

from mnemo_sea.archive import Archive, InvalidInput, ReceiptKey
from mnemo_sea.archive.storage.deployment_key import Rotation, rotate_key
from mnemo_sea.archive.storage.store import RECEIPT_KEY_FILE
from mnemo_sea.retrieval import Embedder
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.embedders import build_embedder
from mnemo_sea.system.wiring.layout import ARCHIVE_FILE
from mnemo_sea.system.wiring.settings import MnemoSettings, settings_receipt_key


def settings_embedder(settings: MnemoSettings) -> Embedder | None:
    """The embedder the settings ask for; None means the default model."""
    return build_embedder(settings.embedder)


def open_mnemo(
    settings: MnemoSettings, *, embedder: Embedder | None = None, sync_writes: bool | None = None
) -> Mnemo:
    """Server mode when MNEMO_DATABASE_URL is set, else the embedded default in MNEMO_DATA_DIR.

    Raises InvalidInput when neither is configured, StoreUnavailable / CacheUnavailable /
    IndexUnavailable / IndexLocked when a component cannot be reached or is held elsewhere.
    """
    chosen = embedder if embedder is not None else settings_embedder(settings)
    sync = settings.sync_writes if sync_writes is None else sync_writes
    if settings.server_mode:
        return Mnemo.from_settings(settings, embedder=chosen, sync_writes=sync)
    if settings.data_dir is None:
        raise InvalidInput(
            "settings", "set MNEMO_DATA_DIR (embedded) or MNEMO_DATABASE_URL and MNEMO_QDRANT_URL (server)"
        )
    mnemo = Mnemo.open(settings.data_dir, embedder=chosen)
    mnemo.sync_writes = sync
    return mnemo


def open_archive(settings: MnemoSettings) -> Archive:
    """The archive alone (no index, no model): for key management and other archive-only work."""
    if settings.server_mode:
        assert settings.database_url is not None
        return Archive.open(settings.database_url, receipt_key=settings_receipt_key(settings))
    if settings.data_dir is None:
        raise InvalidInput("settings", "set MNEMO_DATA_DIR (embedded) or MNEMO_DATABASE_URL (server)")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return Archive.open(str(settings.data_dir / ARCHIVE_FILE))


def rotate_receipt_key(settings: MnemoSettings) -> Rotation:
    """Replace the deployment key by a new one, keeping the old one for verifying what it signed
    (archive/storage/deployment_key.py): the embedded folder's `receipt.key`, or in server mode the file
    MNEMO_RECEIPT_KEY_FILE names. Also the way on after a lost key: a new key is started (nothing
    the lost one signed verifies again). Running processes sign with the old key until restarted.

    Raises InvalidInput when the folder holds no archive or the key is given as text
    (MNEMO_RECEIPT_KEY: it is rotated where it is kept), StoreUnavailable when a file cannot be
    written.
    """
    if settings.server_mode:
        assert settings.database_url is not None
        path = settings.receipt_key_file
        if path is None or settings.receipt_key is not None:
            raise InvalidInput(
                "settings",
                "only a key file can be rotated here: set MNEMO_RECEIPT_KEY_FILE (not MNEMO_RECEIPT_KEY) "
                "to the file every process of the deployment reads",
            )
        # The key in the file may be the lost one: the archive is opened with a stand-in that
        # signs nothing (the rotation reads and writes the file itself).
        archive = Archive.open(settings.database_url, receipt_key=ReceiptKey.ephemeral())
    else:
        if settings.data_dir is None:
            raise InvalidInput("settings", "set MNEMO_DATA_DIR (embedded) or MNEMO_DATABASE_URL (server)")
        if not (settings.data_dir / ARCHIVE_FILE).is_file():
            raise InvalidInput(
                "data_dir",
                f"{settings.data_dir} holds no archive: `mnemo-sea init` creates one, with its key",
            )
        path = settings.data_dir / RECEIPT_KEY_FILE
        # The one opening of a folder whose key may be lost: the rotation replaces it.
        archive = Archive.open(str(settings.data_dir / ARCHIVE_FILE), allow_missing_key=True)
    try:
        return rotate_key(archive.store, path)
    finally:
        archive.close()
