"""Service configuration, read from the environment (MNEMO_*) by pydantic-settings.

One settings object serves every long-running surface (`serve`, `mcp`, `worker`): with
MNEMO_DATABASE_URL set they run in server mode, otherwise on the embedded default in
MNEMO_DATA_DIR.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from mnemo_sea.archive import InvalidInput, ReceiptKey
from mnemo_sea.system.wiring.embedders import EmbedderName


class MnemoSettings(BaseSettings):
    """Where the components are and how the service behaves.

    MNEMO_DATA_DIR       the embedded default: a SQLite archive and a Qdrant Edge index in one folder
    MNEMO_DATABASE_URL   server mode, the archive: postgresql+psycopg://user:pass@host/db
    MNEMO_QDRANT_URL     server mode, the index: http://qdrant:6333 (":memory:" runs an in-process engine)
    MNEMO_QDRANT_COLLECTION, MNEMO_QDRANT_API_KEY
    MNEMO_INDEX_PATH     server mode without a Qdrant server: an embedded Qdrant Edge index in this
                         folder, owned by one API process (writes sync; no separate worker can open it)
    MNEMO_REDIS_URL      shared caches: redis://host:6379/0 (unset: an in-process cache, one API process)
    MNEMO_REDIS_PREFIX   key prefix, so several deployments can share one Redis
    MNEMO_EMBEDDER       default (all-MiniLM-L6-v2) | hashing (deterministic; tests and smoke runs only)
    MNEMO_SYNC_WRITES    true: a write returns once the index has it; false: an outbox worker applies it
    MNEMO_MAX_REQUEST_BYTES  the largest request body the API accepts (413 above it)
    MNEMO_API_THREADS    how many requests an API process runs at once in its thread pool (default
                             4; the others wait their turn in the event loop): one process runs
                             Python on one core at a time, so more threads only contend for it;
                             a request that waits long (a lock, a large ingest, fsck) holds one,
                             so raise it where such requests are common
    MNEMO_API_TENANT_THREADS how many of those one tenant's requests may hold at once (default:
                             half of MNEMO_API_THREADS, at least 1), so the other tenants always
                             find threads free; its further requests wait their turn in a line
                             of their own, served round-robin with the other tenants' lines.
                             A deployment with one tenant may set it to MNEMO_API_THREADS
    MNEMO_API_TENANT_QUEUE   how many requests of one tenant may wait for a thread (default 64);
                             one more gets 429 `too_many_requests` with Retry-After, before any work
    MNEMO_KEY_CACHE_SECONDS  how long an API process trusts a key it verified before reading the key
                             table again (default 5; 0: read it on every request). A key revoked by
                             another process (`mnemo-sea keys revoke`, another API process) is refused
                             within this many seconds; one revoked in the same process at once
    MNEMO_TTL_PURGE_SECONDS  how often the outbox worker deletes expired memory facts (default 300;
                             0: never, then run `mnemo-sea memory purge-expired` yourself)
    MNEMO_OPERATOR_TENANT    admins of this tenant are the deployment's operators: they read /metrics,
                             which covers every tenant (unset: nobody does)
    MNEMO_RECEIPT_KEY        server mode: the deployment key (32+ characters) that signs deletion
                             receipts and audit anchors; every API process and worker shares it
    MNEMO_RECEIPT_KEY_FILE   or a file holding it; it must exist (it is never created here, so every
                             process reads the same key: `openssl rand -hex 32 > FILE`).
                             Server mode needs one of the two; the embedded default keeps
                             `receipt.key` in the data folder.
    """

    model_config = SettingsConfigDict(env_prefix="MNEMO_", extra="ignore")

    data_dir: Path | None = None
    database_url: str | None = None
    qdrant_url: str | None = None
    qdrant_collection: str = "mnemo_evidence"
    qdrant_api_key: SecretStr | None = None
    index_path: Path | None = None
    redis_url: str | None = None
    redis_prefix: str = "mnemo-sea:"
    embedder: EmbedderName = "default"
    sync_writes: bool = True
    # The archive takes originals up to 16 MiB; JSON escaping can double that.
    max_request_bytes: int = Field(default=40 * 1024 * 1024, ge=1024)
    # Enough to overlap one request's Python with others' waits on PostgreSQL, Redis and fsync;
    # 40 (the thread pool's own default) contended for the GIL: 10 % fewer searches a second at
    # 8 clients, and archives starved behind searches at 32 (docs/figures.md, issue 13).
    api_threads: int = Field(default=4, ge=1, le=256)
    # None: half the pool. A tenant's share is a count of threads: the rest stay free for the
    # others whatever it sends (rest/admission.py; the figures of `bench api --flood` in docs/figures.md).
    api_tenant_threads: int | None = Field(default=None, ge=1, le=256)
    # Enough for a tenant's burst of agents to wait rather than be refused; beyond it, a client
    # is told when to come back instead of adding to a line it would wait in for minutes.
    api_tenant_queue: int = Field(default=64, ge=0, le=100_000)
    # Bounded so that a revocation made elsewhere always takes effect within a minute.
    key_cache_seconds: float = Field(default=5.0, ge=0, le=60)
    operator_tenant: str | None = None
    ttl_purge_seconds: float = Field(default=300.0, ge=0)
    receipt_key: SecretStr | None = None
    receipt_key_file: Path | None = None

    @property
    def tenant_threads(self) -> int:
        """The threads one tenant's requests may hold at once: MNEMO_API_TENANT_THREADS, at most
        the pool, by default half of it (at least 1)."""
        given = self.api_tenant_threads
        return min(given, self.api_threads) if given is not None else max(1, self.api_threads // 2)

    @property
    def server_mode(self) -> bool:
        return self.database_url is not None


def settings_receipt_key(settings: MnemoSettings) -> ReceiptKey | None:
    """The deployment key the settings name (MNEMO_RECEIPT_KEY or MNEMO_RECEIPT_KEY_FILE), or None.

    Server mode only. Raises InvalidInput when both are set, the file does not exist or the key
    is shorter than 32 characters; StoreUnavailable when the file cannot be read.
    """
    if settings.receipt_key is not None and settings.receipt_key_file is not None:
        raise InvalidInput("settings", "set MNEMO_RECEIPT_KEY or MNEMO_RECEIPT_KEY_FILE, not both")
    if settings.receipt_key is not None:
        return ReceiptKey.from_text(settings.receipt_key.get_secret_value())
    path = settings.receipt_key_file
    if path is None:
        return None
    # Never created here (unlike the embedded default's receipt.key): a mistyped path or a
    # volume not shared with the other nodes would give each process a key of its own, and
    # they would reject each other's receipts and anchors.
    if not path.exists():
        shown = path if path.is_absolute() else f"{path} ({path.absolute()})"
        raise InvalidInput(
            "settings",
            f"MNEMO_RECEIPT_KEY_FILE names {shown}, which does not exist; create it once and give "
            f"every API process and worker the same file: `openssl rand -hex 32 > {path}; chmod 600 {path}`",
            receipt_key_file=str(path),
        )
    return ReceiptKey.load(path)
