"""`mnemo-sea ui` as a user runs it: a real process on a data folder, the sign-in link it prints,
the pages behind it as the principal it was started as; and its refusals, one clear line each."""

from __future__ import annotations

import re
import select
import socket
import subprocess
import sys
from pathlib import Path

import httpx

CLI = [sys.executable, "-c", "from mnemo_sea.cli.app import main; main()"]
# How long an answer may take before the test fails: a bound on a hang, not a measure of speed.
ANSWER_WAIT_SECONDS = 300


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, check=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_ui_prints_a_sign_in_link_that_opens_the_tenants_console(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    common = ("--data-dir", data, "--embedder", "hashing", "--tenant", "clinic")
    assert _run("init", *common).returncode == 0
    recorded = _run("session", "record", "visit-1", "lab", "--content", "ALT 112 (high)", *common)
    assert recorded.returncode == 0, recorded.stderr
    port = _free_port()
    proc = subprocess.Popen(
        [*CLI, "ui", *common, "--role", "admin", "--subject", "vet", "--port", str(port)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        # Printed once the server listens; a process that never prints fails the test, not hangs it.
        ready, _, _ = select.select([proc.stderr], [], [], ANSWER_WAIT_SECONDS)
        assert ready, "mnemo-sea ui printed no sign-in link"
        line = proc.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/ui/login\?token=\S+)", line)
        assert found and "tenant 'clinic' as 'vet'" in line, line
        with httpx.Client(timeout=ANSWER_WAIT_SECONDS) as client:
            page = client.get(found.group(1), follow_redirects=True)
            assert page.status_code == 200, page.text
            assert 'id="who-tenant">clinic<' in page.text and "visit-1" in page.text
            result = client.get(f"http://127.0.0.1:{port}/ui/sessions/visit-1/results/r1")
            assert "ALT 112 (high)" in result.text
            stranger = httpx.get(f"http://127.0.0.1:{port}/ui/sessions", timeout=ANSWER_WAIT_SECONDS)
            assert stranger.status_code == 401 and "visit-1" not in stranger.text  # no link, no data
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_ui_refuses_a_missing_data_folder_in_one_line(tmp_path: Path) -> None:
    proc = _run("ui", "--data-dir", str(tmp_path / "none"), "--embedder", "hashing")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: no mnemo data folder at {tmp_path / 'none'} (no archive.db); "
        f"create it with: mnemo-sea init --data-dir {tmp_path / 'none'}"
    ]
