"""The processes an API benchmark runs, all on loopback: the API server and its stores.

- `ApiServer`: `mnemo-sea serve` as a subprocess on a free 127.0.0.1 port, its JSON log in a file.
- `scratch_database` / `scratch_redis_prefix`: a database and a key prefix of their own on the
  shared servers, dropped and deleted afterwards (the servers themselves are never touched).
- `Watchdog`: the hard timeout of a run.

Throwaway servers for the fault scenario are in `throwaway_stores`. Every wait is bounded; a
process that does not come up raises `StackError` with its log tail.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis

from mnemo_sea.archive import Archive

LOOPBACK = "127.0.0.1"
# Server mode needs a deployment key (it signs deletion receipts); benchmarks use a fixed one.
BENCH_RECEIPT_KEY = "bench-only-receipt-key-0123456789abcdef"


class StackError(Exception):
    """A process of the stack could not be started, reached or stopped within its bound."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


def wait_until(check: Callable[[], bool], timeout_s: float, what: str, *, step_s: float = 0.05) -> float:
    """Poll `check` until it is true; returns the seconds it took, StackError after `timeout_s`."""
    started = time.monotonic()
    while True:
        if check():
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise StackError(f"{what}: not ready after {timeout_s:.0f} s")
        time.sleep(step_s)


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ---- the shared servers: a database and a key prefix of our own -----------------------------------


def sqlalchemy_url(admin_url: str, database: str) -> str:
    """`postgresql://u@h:p/postgres` -> `postgresql+psycopg://u@h:p/<database>`."""
    base = admin_url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    return f"{base}/{database}"


def postgres_problem(admin_url: str) -> str | None:
    """None when the server answers, else the first line of why not."""
    try:
        with psycopg.connect(admin_url, connect_timeout=3):
            return None
    except psycopg.Error as e:
        return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def redis_problem(url: str) -> str | None:
    client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    try:
        client.ping()
        return None
    except redis.RedisError as e:
        return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    finally:
        client.close()


@contextlib.contextmanager
def scratch_database(admin_url: str, prefix: str = "mnemo_bench") -> Iterator[str]:
    """A fresh, empty database on the server at `admin_url` (SQLAlchemy URL), dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield sqlalchemy_url(admin_url, name)
    finally:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def delete_redis_prefix(url: str, prefix: str) -> int:
    client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=10)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        return int(client.delete(*keys)) if keys else 0
    finally:
        client.close()


@contextlib.contextmanager
def scratch_redis_prefix(url: str, label: str = "bench") -> Iterator[str]:
    """A key prefix no one else uses on the Redis at `url`; its keys are deleted afterwards."""
    prefix = f"mnemo-{label}-{uuid.uuid4().hex[:10]}:"
    try:
        yield prefix
    finally:
        with contextlib.suppress(redis.RedisError):
            delete_redis_prefix(url, prefix)


def mint_keys(database_url: str, tenant: str, subjects: Sequence[str], roles: Sequence[str]) -> list[str]:
    """One API key per subject (migrating a fresh database on the way); returns the keys."""
    archive = Archive.open(database_url)
    try:
        return [
            archive.create_key(tenant_id=tenant, subject=s, roles=list(roles), name="bench")[0]
            for s in subjects
        ]
    finally:
        archive.close()


# ---- the API server ---------------------------------------------------------------------------------


class ApiServer:
    """`mnemo-sea serve` in a subprocess on a free loopback port, configured only by `env`.

    MNEMO_* variables of the calling process are not inherited, so the server runs on exactly
    the stores it is given. The log (JSON lines) goes to `log_path`.
    """

    def __init__(self, env: Mapping[str, str], log_path: Path, *, startup_timeout_s: float = 120.0) -> None:
        self.port = free_port()
        self.base_url = f"http://{LOOPBACK}:{self.port}"
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
        # A fixed deployment key unless given.
        key = {"MNEMO_RECEIPT_KEY": BENCH_RECEIPT_KEY}
        self.env = {**inherited, **key, **env, "PYTHONUNBUFFERED": "1"}
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> float:
        """Start the server and wait until it answers; returns the start-up seconds."""
        command = [
            sys.executable,
            "-c",
            "from mnemo_sea.cli.app import main; main()",
            "serve",
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
        ]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

        def answers() -> bool:
            if not self.alive():
                raise StackError(f"the API server exited at start-up:\n{tail(self.log_path)}")
            try:
                return httpx.get(f"{self.base_url}/v1/health/live", timeout=1.0).status_code == 200
            except httpx.HTTPError:
                return False

        return wait_until(answers, self.startup_timeout_s, "the API server", step_s=0.2)

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM (a graceful uvicorn shutdown), then SIGKILL if it is still there."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=timeout_s)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()

    def log_problems(self, limit: int = 10) -> dict[str, Any]:
        """Error lines of the server log (unexpected errors carry their traceback) and 5xx counts."""
        errors: list[dict[str, Any]] = []
        count = 0
        status_5xx: dict[str, int] = {}
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            status = entry.get("status")
            if isinstance(status, int) and status >= 500:
                route = f"{entry.get('method')} {entry.get('route')} {status}"
                status_5xx[route] = status_5xx.get(route, 0) + 1
            if entry.get("level") in ("error", "critical"):
                count += 1
                if len(errors) < limit:
                    errors.append({k: entry.get(k) for k in ("ts", "logger", "msg", "error_type", "exc")})
        return {"error_lines": count, "errors": errors, "responses_5xx": status_5xx}


def keep_logs(paths: Sequence[Path], label: str, into: Path | None = None) -> Path:
    """Copy the logs that exist among `paths` into `into` (default: a new temp folder), which
    outlives the run."""
    folder = into if into is not None else Path(tempfile.mkdtemp(prefix=f"mnemo-{label}-logs-"))
    folder.mkdir(parents=True, exist_ok=True)
    for path in paths:
        if path.is_file():
            shutil.copy2(path, folder / path.name)
    return folder


class Watchdog:
    """Calls `on_expire` (kill the API server, and so end every wait on it) when a run
    overstays `timeout_s`; `expired` tells the report. A context manager: leaving cancels it."""

    def __init__(self, timeout_s: float, on_expire: Callable[[], None]) -> None:
        self.timeout_s = timeout_s
        self.expired = False
        self._on_expire = on_expire
        self._timer = threading.Timer(timeout_s, self._expire)
        self._timer.daemon = True

    def _expire(self) -> None:
        self.expired = True
        self._on_expire()

    def __enter__(self) -> Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._timer.cancel()
