"""JSON nested deeper than the one limit (mnemo_sea.system.json_text) is input, never a crash:
every command that reads user JSON exits 2 with `json_too_deep`, the limit and where it was, and
stores nothing. In-process through the Typer app the `mnemo-sea` process runs (as
test_cli_loads.py does), so each command costs no process start.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mnemo_sea.cli.app import app

AGENT = ["--tenant", "clinic-a", "--subject", "agent-1", "--role", "agent"]
ENV = {"MNEMO_EMBEDDER": "hashing", "MNEMO_DATA_DIR": None, "MNEMO_DATABASE_URL": None}
# Far deeper than Python's recursion limit: json.loads alone raises RecursionError on it.
ABYSS = 100_000


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def cli(*args: str | Path, stdin: str | None = None) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV, input=stdin)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("deep") / "data"
    assert cli("init", "--data-dir", data).exit_code == 0
    return data


def _rows(folder: Path) -> dict[str, int]:
    """What is stored, read from the archive file itself."""
    with sqlite3.connect(folder / "archive.db") as conn:
        return {
            table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("evidence", "tool_results", "task_states", "sessions")
        }


def _refused(result: Any, where: str) -> dict[str, Any]:
    from mnemo_sea.system.json_text import MAX_JSON_DEPTH

    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert "RecursionError" not in result.stderr + result.stdout and "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and where in line and f"deeper than {MAX_JSON_DEPTH} levels" in line
    return dict(json.loads(result.stdout)["error"])


def test_every_command_reading_user_json_refuses_deep_nesting_with_exit_2(
    folder: Path, tmp_path: Path
) -> None:
    from mnemo_sea.system.json_text import MAX_JSON_DEPTH

    deep = tmp_path / "deep.json"
    deep.write_text(nested(ABYSS), encoding="utf-8")
    before = _rows(folder)

    commands: list[tuple[list[str | Path], str | None]] = [
        (["verify-deleted", deep], None),
        (["audit", "verify", "--anchor", deep], None),
        (["session", "task-state", "set", "s-1", "--file", deep], None),
        (["session", "task-state", "set", "s-1", "--file", "-"], nested(ABYSS)),
        (["session", "context", "s-1", "--budget-tokens", "1000", "--tools-file", deep], None),
        (["session", "record", "s-1", "t", "--content", "x", "--arguments", nested(200)], None),
    ]
    for args, stdin in commands:
        result = cli(*args, "--data-dir", folder, *AGENT, "--json", stdin=stdin)
        where = "--arguments" if "--arguments" in args else "--file -" if stdin else str(deep)
        error = _refused(result, where)
        assert error["code"] == "json_too_deep", args
        assert error["detail"]["limit"] == MAX_JSON_DEPTH and error["detail"]["field"] == where
    assert _rows(folder) == before  # nothing of any of them was stored


@pytest.mark.parametrize("command", ["ingest", "eval"])
def test_a_deep_jsonl_line_is_named_by_its_line_and_nothing_is_loaded(
    folder: Path, tmp_path: Path, command: str
) -> None:
    lines = tmp_path / "docs.jsonl"
    good = {"body": "fine", "source": "s", "citations": []}
    lines.write_text(json.dumps(good) + '\n{"body": ' + nested(ABYSS) + "}\n", encoding="utf-8")
    before = _rows(folder)

    args = ["ingest", lines] if command == "ingest" else ["eval", "citations", lines]
    result = cli(*args, "--data-dir", folder, *AGENT, "--json")

    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "RecursionError" not in result.stderr + result.stdout
    from mnemo_sea.system.json_text import MAX_JSON_DEPTH

    assert f"line 2: JSON nested deeper than {MAX_JSON_DEPTH} levels" in result.stderr
    assert _rows(folder) == before


def test_arguments_at_the_field_limit_are_recorded_and_one_more_is_json_too_deep(folder: Path) -> None:
    # `--arguments` is the whole document and the field at once: the field limit decides.
    from mnemo_sea.archive.rules.limits import JSON_DEPTH

    def arguments(levels: int) -> str:
        return '{"a": ' + nested(levels - 1) + "}"

    before = _rows(folder)["tool_results"]
    ok = cli(
        "session",
        "record",
        "s-args",
        "t",
        "--content",
        "x",
        "--arguments",
        arguments(JSON_DEPTH),
        "--data-dir",
        folder,
        *AGENT,
        "--json",
    )
    assert ok.exit_code == 0, (ok.stdout, ok.stderr)
    over = cli(
        "session",
        "record",
        "s-args",
        "t",
        "--content",
        "x",
        "--arguments",
        arguments(JSON_DEPTH + 1),
        "--data-dir",
        folder,
        *AGENT,
        "--json",
    )
    assert over.exit_code == 2, (over.stdout, over.stderr)
    error = json.loads(over.stdout)["error"]
    assert error["code"] == "json_too_deep" and error["detail"]["limit"] == JSON_DEPTH, error
    assert _rows(folder)["tool_results"] == before + 1  # only the one at the limit stored


def test_the_limit_is_exact_and_the_parser_never_recurses_past_it() -> None:
    from mnemo_sea.archive import InvalidInput
    from mnemo_sea.system.json_text import MAX_JSON_DEPTH, JsonTooDeep, parse_json
    from mnemo_sea.system.outcomes import outcome_of

    at_limit = nested(MAX_JSON_DEPTH)
    assert parse_json(at_limit, "x") == json.loads(at_limit)
    assert parse_json('{"a": [1, {"b": 2}]}', "x") == {"a": [1, {"b": 2}]}
    over = MAX_JSON_DEPTH + 1
    for text in (nested(over), '{"a": ' * over + "1" + "}" * over, nested(ABYSS)):
        with pytest.raises(JsonTooDeep) as raised:
            parse_json(text, "tools.json")
        assert isinstance(raised.value, InvalidInput) and raised.value.limit == MAX_JSON_DEPTH
        assert raised.value.field == "tools.json"
        outcome = outcome_of(raised.value)
        assert (outcome.http_status, outcome.exit_code, outcome.code) == (422, 2, "json_too_deep")
    with pytest.raises(json.JSONDecodeError):  # not JSON is each caller's to word, as before
        parse_json("[1,", "x")
