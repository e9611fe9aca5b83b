"""Server-mode configuration, read from the environment (MNEMO_*) by pydantic-settings."""

from __future__ import annotations

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class MnemoSettings(BaseSettings):
    """Where the server components are.

    MNEMO_DATABASE_URL   the archive: postgresql+psycopg://user:pass@host/db (or a SQLite URL)
    MNEMO_QDRANT_URL     the index: http://qdrant:6333 (":memory:" runs an in-process engine)
    MNEMO_QDRANT_COLLECTION, MNEMO_QDRANT_API_KEY
    MNEMO_REDIS_URL      shared caches: redis://host:6379/0 (unset: an in-process cache, one API process)
    MNEMO_REDIS_PREFIX   key prefix, so several deployments can share one Redis
    """

    model_config = SettingsConfigDict(env_prefix="MNEMO_", extra="ignore")

    database_url: str | None = None
    qdrant_url: str | None = None
    qdrant_collection: str = "mnemo_evidence"
    qdrant_api_key: SecretStr | None = None
    redis_url: str | None = None
    redis_prefix: str = "mnemo-sea:"
