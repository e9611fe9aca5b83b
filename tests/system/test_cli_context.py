"""`mnemo-sea session context` and `session task-state show|set|history`, in-process (the same
Typer app the process runs; tests/system/test_cli_commands.py runs real processes): the
accounting is `Mnemo.context`'s for the same folder, refusals exit 2 listing every problem with
nothing stored, a stale version exits 5, another tenant's session 3."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mnemo_sea.archive import Archive, Principal, Role, Sensitivity
from mnemo_sea.cli.app import app
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder
from mnemo_sea.system.wiring.layout import ARCHIVE_FILE

AGENT = ["--tenant", "clinic-a", "--subject", "agent-1", "--role", "agent"]
PRINCIPAL = Principal("clinic-a", "agent-1", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
ENV = {"MNEMO_EMBEDDER": "hashing", "MNEMO_DATA_DIR": None, "MNEMO_DATABASE_URL": None}
LOG = "GET /orders 200\n" * 400
STATE = {
    "goal": "refund order 1042 once the payment clears",
    "constraints": ["no refund before the payment clears"],
    "unresolved": ["has the payment cleared"],
    "confirmed": [{"fact": "the payment is pending", "evidence_id": "result:o-1042/r2"}],
}


def cli(*args: str | Path, stdin: str | None = None) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV, input=stdin)


def ok(*args: str | Path, stdin: str | None = None) -> Any:
    result = cli(*args, "--json", stdin=stdin)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def one_error(result: Any, code: int, error_code: str) -> dict[str, Any]:
    """Exit `code`, one `error:` line on stderr, and with --json the error (its `code`) on stdout."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    error: dict[str, Any] = json.loads(result.stdout)["error"]
    assert (error["code"], error["exit_code"]) == (error_code, code)
    return error


def versions(folder: Path, session: str) -> list[int]:
    """The stored versions, read by the library (the state, not the command's report)."""
    archive = Archive.open(str(folder / ARCHIVE_FILE))
    try:
        return [s.version for s in archive.task_state_history(PRINCIPAL, session)]
    finally:
        archive.close()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli-context")
    data = root / "data"
    ok("init", "--data-dir", data)
    log = root / "log.txt"
    log.write_text(LOG, encoding="utf-8")
    common = ["--data-dir", data, *AGENT]
    ok("session", "record", "o-1042", "orders.log", "--file", log, *common)
    ok(
        "session", "record", "o-1042", "payments.get", "--content", "payment 1042: pending",
        "--policy-class", "approval_record", *common,
    )  # fmt: skip
    state = root / "state.json"
    state.write_text(json.dumps(STATE), encoding="utf-8")
    written = ok(
        "session", "task-state", "set", "o-1042", "--file", state, "--expected-version", "0", *common
    )
    assert written["version"] == 1
    return data


def test_context_json_is_the_libraries_accounting_and_human_output_shows_it(
    folder: Path, tmp_path: Path
) -> None:
    instructions = tmp_path / "instructions.txt"
    instructions.write_text("You are the shop's order assistant.", encoding="utf-8")
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": "orders.get"}, "refund(order_id)"]), encoding="utf-8")
    args = [
        "session", "context", "o-1042", "--budget", "1500", "--reserve", "200",
        "--instructions-file", instructions, "--tools-file", tools, "--data-dir", folder, *AGENT,
    ]  # fmt: skip
    got = ok(*args)
    with Mnemo.open(folder, embedder=HashingEmbedder()) as mnemo:
        expected = mnemo.context(
            PRINCIPAL,
            "o-1042",
            budget_tokens=1500,
            output_reserve=200,
            instructions=instructions.read_text(encoding="utf-8"),
            tools=[{"name": "orders.get"}, "refund(order_id)"],
        ).to_dict()
    assert got == expected
    assert [x["ids"] for x in got["left_out"]] == [["r1"]]
    assert [c["result_id"] for c in got["archive_candidates"]] == ["r1"]

    human = cli(*args)
    assert human.exit_code == 0, human.stderr
    out = human.stdout
    for name, tokens in got["totals"].items():
        assert any(line.split() == [name, str(tokens)] for line in out.splitlines()), name
    for n, seg in enumerate(got["segments"], start=1):
        pinned = "pinned" if seg["pinned"] else f"p{seg['priority']}"
        line = next(line for line in out.splitlines() if line.strip().startswith(f"{n}. "))
        assert seg["kind"] in line and f"{seg['tokens']} tokens" in line and pinned in line
    assert got["left_out"][0]["reason"] in out and "r1 orders.log" in out
    assert "nothing was archived" in out and "None" not in out

    text = cli(*args, "--text")
    assert text.exit_code == 0 and text.stdout == got["text"]
    # Reads only: r1 was proposed, not archived.
    states = [i["state"] for i in ok("session", "live", "o-1042", "--data-dir", folder, *AGENT)["items"]]
    assert states == ["live", "live"]


def test_a_context_over_the_budget_and_bad_files_exit_2(folder: Path, tmp_path: Path) -> None:
    common = ["--data-dir", folder, *AGENT]
    over = cli("session", "context", "o-1042", "--budget", "60", "--reserve", "10", *common, "--json")
    error = one_error(over, 2, "context_over_budget")
    detail = error["detail"]
    assert (detail["budget_tokens"], detail["output_reserve"], detail["available_tokens"]) == (60, 10, 50)
    assert detail["pinned_tokens"] == sum(detail["pinned"].values()) > 50
    assert "pinned segments are never cut" in over.stderr

    not_a_list = tmp_path / "tools.json"
    not_a_list.write_text('{"name": "x"}', encoding="utf-8")
    for extra in (
        ["--tools-file", not_a_list],
        ["--tools-file", tmp_path / "missing.json"],
        ["--instructions-file", tmp_path / "missing.txt"],
        ["--reserve", "5000"],
    ):
        result = cli("session", "context", "o-1042", "--budget", "5000", *extra, *common, "--json")
        assert result.exit_code == 2, (extra, result.stdout, result.stderr)
        assert "Traceback" not in result.stdout + result.stderr
    missing = cli("session", "context", "nope", "--budget", "5000", *common, "--json")
    one_error(missing, 3, "not_found")
    stranger = ["--data-dir", folder, "--tenant", "shop-b", "--subject", "agent-1"]
    one_error(cli("session", "context", "o-1042", "--budget", "5000", *stranger, "--json"), 3, "not_found")


def test_task_state_show_set_and_history(folder: Path, tmp_path: Path) -> None:
    common = ["--data-dir", folder, *AGENT]
    ok("session", "record", "o-7", "payments.get", "--content", "payment 7: cleared", *common)
    empty = cli("session", "task-state", "show", "o-7", *common)
    assert empty.exit_code == 0 and "no task state yet" in empty.stdout
    assert ok("session", "task-state", "show", "o-7", *common) is None

    first = {"goal": "refund order 7", "unresolved": ["has the payment cleared"]}
    assert (
        ok("session", "task-state", "set", "o-7", "--file", "-", *common, stdin=json.dumps(first))["version"]
        == 1
    )
    settled = {
        "goal": "refund order 7",
        "confirmed": [
            {
                "fact": "payment 7 cleared",
                "evidence_id": "result:o-7/r1",
                "resolves": "has the payment cleared",
            }
        ],
        "constraints": ["refund to the original card only"],
        "expected_version": 1,
    }
    path = tmp_path / "settled.json"
    path.write_text(json.dumps(settled), encoding="utf-8")
    second = ok("session", "task-state", "set", "o-7", "--file", path, *common)
    assert (second["version"], second["unresolved"], second["sensitivity"]) == (2, [], "internal")

    shown = cli("session", "task-state", "show", "o-7", *common)
    assert shown.exit_code == 0
    for needle in (
        "version 2 (current)",
        "goal: refund order 7",
        "- refund to the original card only",
        "payment 7 cleared [result:o-7/r1] (resolves: has the payment cleared)",
        "trace_ref: —",
    ):
        assert needle in shown.stdout, needle
    old = ok("session", "task-state", "show", "o-7", "--version", "1", *common)
    assert (old["version"], old["status"]) == (1, "superseded")
    history = ok("session", "task-state", "history", "o-7", *common)
    assert [v["version"] for v in history["versions"]] == [1, 2]
    lines = cli("session", "task-state", "history", "o-7", *common).stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["v1 superseded", "v2 current"]
    assert versions(folder, "o-7") == [1, 2]

    one_error(
        cli("session", "task-state", "show", "o-7", "--version", "3", *common, "--json"), 3, "not_found"
    )
    one_error(cli("session", "task-state", "show", "nope", *common, "--json"), 3, "not_found")
    stranger = ["--data-dir", folder, "--tenant", "shop-b", "--subject", "agent-1"]
    one_error(cli("session", "task-state", "history", "o-7", *stranger, "--json"), 3, "not_found")


def test_a_refused_write_lists_every_problem_and_stores_nothing(folder: Path) -> None:
    common = ["--data-dir", folder, *AGENT]
    dropped = {"goal": "refund order 1042", "confirmed": [{"fact": "it cleared"}]}
    result = cli(
        "session", "task-state", "set", "o-1042", "--file", "-", *common, "--json", stdin=json.dumps(dropped)
    )
    error = one_error(result, 2, "task_state_rejected")
    found = {(p["field"], p["problem"], p["item"]) for p in error["detail"]["problems"]}
    assert found == {
        ("confirmed[0].evidence_id", "evidence_required", None),
        ("constraints", "constraint_dropped", STATE["constraints"][0]),
        ("unresolved", "open_item_dropped", STATE["unresolved"][0]),
        # The pending payment fact is dropped too, but a fact may go: only open items and constraints count.
    }, error["detail"]["problems"]
    # Without --json each problem, with how to fix it, is on stdout; the error line stays one line.
    human = cli("session", "task-state", "set", "o-1042", "--file", "-", *common, stdin=json.dumps(dropped))
    assert human.exit_code == 2 and len(human.stderr.strip().splitlines()) == 1
    assert "constraint_dropped: a constraint of the previous version is missing" in human.stdout
    assert f"unresolved {STATE['unresolved'][0]!r}: open_item_dropped" in human.stdout
    assert versions(folder, "o-1042") == [1]

    stale = cli("session", "task-state", "set", "o-1042", "--file", "-", "--expected-version", "0", *common,
                "--json", stdin=json.dumps(STATE))  # fmt: skip
    assert one_error(stale, 5, "state_conflict")["detail"]["current_version"] == 1
    assert versions(folder, "o-1042") == [1]


def test_a_bad_update_file_exits_2_before_anything_is_opened(folder: Path, tmp_path: Path) -> None:
    common = ["--data-dir", folder, *AGENT]
    cases = {
        "a list": "[1, 2]",
        "not json": "{goal",
        "misspelt": json.dumps({"goal": "g", "constriants": ["x"]}),
        "no goal": json.dumps({"constraints": ["x"]}),
        "twice": json.dumps({"goal": "g", "expected_version": 1}),
    }
    for name, body in cases.items():
        extra = ["--expected-version", "1"] if name == "twice" else []
        result = cli(
            "session", "task-state", "set", "o-1042", "--file", "-", *extra, *common, "--json", stdin=body
        )
        error = one_error(result, 2, "invalid_input")
        assert "--file" in error["message"] or "expected_version" in error["message"], name
    misspelt = cli(
        "session", "task-state", "set", "o-1042", "--file", "-", *common, "--json", stdin=cases["misspelt"]
    )
    assert json.loads(misspelt.stdout)["error"]["detail"]["unknown"] == ["constriants"]
    absent = cli(
        "session", "task-state", "set", "o-1042", "--file", tmp_path / "none.json", *common, "--json"
    )
    one_error(absent, 2, "invalid_input")
    assert versions(folder, "o-1042") == [1]


def test_the_commands_are_listed_under_session() -> None:
    session = cli("session", "--help")
    assert session.exit_code == 0 and "context" in session.stdout and "task-state" in session.stdout
    group = cli("session", "task-state", "--help")
    assert group.exit_code == 0 and all(name in group.stdout for name in ("show", "set", "history"))
    unknown = cli("session", "task-state", "frob", "--json")
    assert unknown.exit_code == 2 and json.loads(unknown.stdout)["error"]["code"] == "usage"
