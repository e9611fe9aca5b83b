"""Servers of our own for the fault scenario, which kills and restarts them under load.

Each lives in a temp folder, listens on a port of its own on 127.0.0.1 only and keeps nothing
worth keeping: `ThrowawayPostgres` (initdb, pg_ctl; an immediate shutdown is the kill) and
`ThrowawayRedis` (no persistence; SIGKILL is the kill). Both restart on the same port, and
PostgreSQL on the same data folder, so the API's connection strings stay valid.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import psycopg

from .api_stack import (
    LOOPBACK,
    StackError,
    free_port,
    postgres_problem,
    redis_problem,
    sqlalchemy_url,
    tail,
    wait_until,
)

PG_BIN = Path(os.environ.get("MNEMO_PG_BIN", "/usr/lib/postgresql/15/bin"))
# initdb and postgres refuse to run as root; as root they run as this system user.
PG_OS_USER = "postgres"


def missing_fault_binaries() -> list[str]:
    """The programs the fault scenario needs that this machine lacks (empty: all there)."""
    missing = [str(PG_BIN / b) for b in ("initdb", "pg_ctl", "postgres") if not (PG_BIN / b).is_file()]
    if shutil.which("redis-server") is None:
        missing.append("redis-server (on PATH)")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        missing.append("runuser (PostgreSQL refuses to run as root)")
    return missing


class ThrowawayPostgres:
    """A PostgreSQL cluster of our own in `root`, listening on 127.0.0.1:`port` only.

    As root, the server runs as the `postgres` system user (it refuses root), which gets `root`;
    the folders above it must let that user through.

    fsync is off (the machine does not crash, only the server does, so a commit that reached
    the kernel survives a kill); synchronous_commit stays on, so an acknowledged commit is in
    the WAL before the client hears of it. `kill()` is an immediate shutdown: no checkpoint,
    every backend gone at once, crash recovery on the next `start()`.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "pgdata"
        self.log = root / "postgres.log"
        self.port = free_port()
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            import pwd

            account = pwd.getpwnam(PG_OS_USER)
            os.chown(root, account.pw_uid, account.pw_gid)
            self._as_user = ["runuser", "-u", PG_OS_USER, "--"]

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@{LOOPBACK}:{self.port}/postgres"

    def _run(self, *args: str, timeout_s: float = 60.0) -> None:
        try:
            subprocess.run(  # noqa: S603 - fixed programs, our own arguments
                [*self._as_user, *args], check=True, capture_output=True, timeout=timeout_s
            )
        except subprocess.CalledProcessError as e:
            out = (e.stderr or b"").decode(errors="replace").strip()
            raise StackError(f"{Path(args[0]).name} failed: {out}\n{tail(self.log)}") from None
        except subprocess.TimeoutExpired:
            raise StackError(f"{Path(args[0]).name} did not finish within {timeout_s:.0f} s") from None

    def init(self) -> None:
        self._run(
            str(PG_BIN / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )

    def start(self) -> float:
        """Start on the same port and data folder; returns the seconds until it accepts queries."""
        started = time.monotonic()
        options = (
            f"-p {self.port} -c listen_addresses={LOOPBACK} -c unix_socket_directories={self.root} "
            "-c fsync=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
            timeout_s=90,
        )
        wait_until(lambda: postgres_problem(self.admin_url) is None, 30, "the throwaway PostgreSQL")
        return time.monotonic() - started

    def kill(self) -> None:
        """Immediate shutdown (SIGQUIT to every process): the equivalent of a crash."""
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(StackError):
                self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return sqlalchemy_url(self.admin_url, name)


class ThrowawayRedis:
    """A redis-server of our own on 127.0.0.1:`port`, without persistence: a restart is empty."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.log = root / "redis.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    def start(self) -> float:
        started = time.monotonic()
        command = [
            shutil.which("redis-server") or "redis-server",
            "--port",
            str(self.port),
            "--bind",
            LOOPBACK,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.root),
            "--logfile",
            str(self.log),
        ]
        self.process = subprocess.Popen(  # noqa: S603 - a fixed program, our own arguments
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )

        def answers() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise StackError(f"redis-server exited at start-up:\n{tail(self.log)}")
            return redis_problem(self.url) is None

        wait_until(answers, 30, "the throwaway Redis")
        return time.monotonic() - started

    def kill(self) -> None:
        """SIGKILL: the server vanishes mid-request, as in a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    stop = kill
