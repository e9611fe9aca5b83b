"""The `mcp` command: its principal options and API key, and one-line errors on stderr
(stdout belongs to the protocol)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from mcp import Client
from mcp.server import Server
from mcp_helpers import payload
from typer.testing import CliRunner

import mnemo_sea.mcp
from mnemo_sea.archive import Archive
from mnemo_sea.archive.features.api_keys import create_key
from mnemo_sea.cli.mcp import register
from mnemo_sea.system.wiring.layout import ARCHIVE_FILE


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.command("other")
    def other() -> None:  # a second command, so `mcp` is a subcommand as in `mnemo-sea`
        """Unused."""

    return app


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


@pytest.mark.parametrize(
    ("option", "value", "needle"),
    [
        ("--role", "boss", "role"),
        ("--clearance", "top-secret", "sensitivity"),
        ("--tenant", "a b", "tenant_id"),
        ("--embedder", "gpt", "embedder"),
    ],
)
def test_bad_principal_options_fail_in_one_line(
    app: typer.Typer, option: str, value: str, needle: str
) -> None:
    result = CliRunner().invoke(app, ["mcp", option, value])
    assert result.exit_code == 2
    assert needle in _one_error_line(result.stderr)
    assert result.stdout == ""


def test_an_unknown_api_key_fails_in_one_line(app: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["mcp", "--api-key", "msk_0123456789abcdef_nope"],
        env={"MNEMO_DATA_DIR": str(tmp_path), "MNEMO_EMBEDDER": "hashing"},
    )
    assert result.exit_code == 2
    assert "unknown or revoked API key" in _one_error_line(result.stderr)
    assert result.stdout == ""


def test_stdio_with_an_api_key_runs_as_the_key_principal(
    app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = Archive.open(str(tmp_path / ARCHIVE_FILE))
    try:
        key, _ = create_key(archive.store, tenant_id="clinic-key", subject="agent-k", roles=["reader"])
    finally:
        archive.close()
    answers: list[dict[str, Any]] = []

    async def serve_and_call(server: Server[Any]) -> None:
        # Instead of serving stdin: call the server the command built, while its system is open.
        async with Client(server) as client:
            result = await client.call_tool(
                "record_result", {"session_id": "s", "tool_name": "t", "content": "x"}
            )
            answers.append(payload(result))

    monkeypatch.setattr(mnemo_sea.mcp, "serve_stdio", serve_and_call)
    result = CliRunner().invoke(
        app,
        ["mcp", "--tenant", "ignored"],
        env={"MNEMO_DATA_DIR": str(tmp_path), "MNEMO_EMBEDDER": "hashing", "MNEMO_API_KEY": key},
    )
    assert result.exit_code == 0, result.stderr
    # The key's principal, not the options: a reader may not record.
    [error] = answers
    assert error["error"] == "forbidden" and "agent-k" in error["message"]


def test_without_an_embedder_option_the_folders_own_is_used_as_serve_does(
    app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnemo_sea.archive import EvidenceInput, Principal, Role
    from mnemo_sea.system.mnemo import Mnemo
    from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

    # A folder whose index was built with the hashing embedder; the default model would be refused.
    with Mnemo.open(tmp_path, embedder=HashingEmbedder()) as mnemo:
        agent = Principal("default", "mcp", frozenset({Role.AGENT}))
        mnemo.ingest(agent, [EvidenceInput(body="llamas eat hay", source="farm", evidence_id="d:1")])
    answers: list[dict[str, Any]] = []

    async def serve_and_call(server: Server[Any]) -> None:
        async with Client(server) as client:
            answers.append(payload(await client.call_tool("search_evidence", {"query": "llamas hay"})))

    monkeypatch.setattr(mnemo_sea.mcp, "serve_stdio", serve_and_call)
    result = CliRunner().invoke(
        app, ["mcp"], env={"MNEMO_DATA_DIR": str(tmp_path), "MNEMO_EMBEDDER": None, "MNEMO_API_KEY": None}
    )

    assert result.exit_code == 0, result.stderr
    [found] = answers
    assert found["status"] == "results" and [h["evidence_id"] for h in found["hits"]] == ["d:1"]
