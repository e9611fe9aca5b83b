"""Opening the system a long-running surface (`serve`, `mcp`, `worker`) runs on, from settings."""

from __future__ import annotations

from mnemo_sea.archive import Archive, InvalidInput
from mnemo_sea.retrieval import Embedder
from mnemo_sea.system.embedders import build_embedder
from mnemo_sea.system.mnemo import ARCHIVE_FILE, Mnemo, settings_receipt_key
from mnemo_sea.system.settings import MnemoSettings


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
