"""The command line behaves as the tools beside it do: `--version`, a closed pipe ends the run
quietly, a mistyped command or flag gets a suggestion. Real processes (the hashing embedder)."""

from __future__ import annotations

import json
import subprocess
from importlib.metadata import version
from pathlib import Path

from test_cli_commands import AGENT, CLI, _env, ok_json, one_line_error, run, write_jsonl


def test_version_prints_the_installed_version() -> None:
    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout == f"mnemo-sea {version('mnemo-sea')}\n"


def test_a_mistyped_command_or_flag_is_answered_with_what_was_meant() -> None:
    one_line_error(run("serch", "refund"), 2, "No such command 'serch'", "Did you mean 'search'")
    one_line_error(run("search", "--limt", "3", "refund"), 2, "--limt", "Possible options: --limit")


def test_a_reader_that_stops_reading_ends_the_run_quietly(tmp_path: Path) -> None:
    """`mnemo-sea search … | head -1`: the output is larger than a pipe holds, the reader takes
    one line and closes; the command stops with no `error:` line, as `grep` does (0 or 141)."""
    folder = tmp_path / "data"
    ok_json("init", "--data-dir", folder)
    rows = [
        json.dumps(
            {"evidence_id": f"kb:long{n}", "body": "refund policy text " * 300 + str(n), "source": "kb"}
        )
        for n in range(60)
    ]
    ok_json("ingest", write_jsonl(tmp_path / "long.jsonl", rows), "--data-dir", folder, *AGENT)
    for as_json in ([], ["--json"]):
        args = [*CLI, "search", "refund", "--limit", "60", "--data-dir", str(folder), *AGENT, *as_json]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        proc.stdout.close()  # the reader goes away with most of the output unread
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) in (0, 141), err
        assert first.strip() and "error" not in err and "Traceback" not in err, err

