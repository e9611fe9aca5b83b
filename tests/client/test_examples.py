"""The programs in examples/ run as a user runs them: in process and against a real API process.

Each is started as a script (`python examples/NAME.py`), in process on a fresh data folder with
the hashing embedder, and with `--url` against the `served` API (embedded and PostgreSQL +
Redis) with an agent key of a tenant of its own. A program exits 1 when a promise it checks
does not hold; on top of the exit code, the test reads what it reported and what it wrote
(the archive's tables, counted raw).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from client_helpers import Served

from mnemo_sea.archive.storage import schema as t

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(script: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def check_rag(report: dict[str, Any]) -> None:
    assert report["stored"] == 4
    assert report["checked"]["ok"] == len(report["citations"]) == 2 and report["precision"] == 1.0
    assert report["citations"][0]["evidence_id"] == "kb:mdr1-ivermectin"  # the passage asked about
    assert report["misquote_caught"] is True


def check_agent(report: dict[str, Any]) -> None:
    assert report["failures"] == []
    turns = {t["turn"][0]: t for t in report["turns"] if "turn" in t}
    # Archiving the log is what frees the budget; recovering it brings its tokens back.
    assert turns["2"]["tokens"] * 10 < turns["1"]["tokens"] <= turns["3"]["tokens"]
    assert any("protected" in t.get("refused", "") for t in report["turns"])
    assert any("stale" in (t.get("stock_warning") or "") for t in report["turns"])


def check_agents_session(report: dict[str, Any]) -> None:
    assert report["failures"] == []
    # The log was archived twice (fetched, then recovered as the recover tool's output), and
    # the recovered bytes are the log's.
    assert len(report["stubs"]) == 2 and report["recovered_bytes"] == report["log_bytes"]
    assert report["clear_as_agent"].startswith("Forbidden")


def check_langgraph(report: dict[str, Any]) -> None:
    assert report["failures"] == []
    assert report["namespaces"] == [["memories", "ann"]]
    assert report["deleted"] == [["lg:memories:ann", "m2", 1]]


def check_vector_stores(report: dict[str, Any]) -> None:
    assert report["failures"] == []
    # The examples act as an agent: deleting is refused (it needs an admin), nothing deleted.
    assert report.get("delete", "refused").startswith("refused")


def check_claude(report: dict[str, Any]) -> None:
    assert report["failures"] == []
    assert report["versions"] == [1, 2, 3]
    assert [r["target"] for r in report["receipts"]] == [
        "evidence:memories/scratch.md",
        "evidence:memories/todo.md",
    ]
    assert report["context"]["recovered_exactly"] is True


CHECKS = {
    "rag_citations.py": check_rag,
    "agent_loop.py": check_agent,
    "openai_agents_session.py": check_agents_session,
    "langgraph_store.py": check_langgraph,
    "langchain_vectorstore.py": check_vector_stores,
    "llama_index_vectorstore.py": check_vector_stores,
    "claude_memory_tool.py": check_claude,
}
# Evidence rows a run leaves in its tenant: every version of every record.
EVIDENCE_ROWS = {"rag_citations.py": 4, "langchain_vectorstore.py": 4, "llama_index_vectorstore.py": 3}
# The memory tool deletes (its example removes two files), which needs an admin's key.
ADMIN_SCRIPTS = {"claude_memory_tool.py"}


@pytest.mark.parametrize("script", sorted(CHECKS))
def test_the_example_runs_in_process(script: str, tmp_path: Path) -> None:
    CHECKS[script](run(script, "--embedder", "hashing", "--data", str(tmp_path / "data")))


@pytest.mark.parametrize("script", sorted(CHECKS))
def test_the_example_runs_against_the_server(script: str, served: Served) -> None:
    tenant = f"examples-{uuid.uuid4().hex[:8]}"
    key = served.key(tenant, "admin" if script in ADMIN_SCRIPTS else "agent")
    report = run(script, "--url", served.base_url, env={"MNEMO_API_KEY": key})
    CHECKS[script](report)
    if script in EVIDENCE_ROWS:
        assert served.count(t.evidence, tenant) == EVIDENCE_ROWS[script]
    elif script == "openai_agents_session.py":
        # Eight items in six batches (the Runner saves a run's input, its tool round and its answer
        # apart), each closed by a commit mark; one pop mark, one recovered copy; nothing deleted.
        assert served.count(t.tool_results, tenant) == 8 + 6 + 1 + 1
        assert served.count(t.tool_results, tenant, state="archived") == 2
    elif script == "langgraph_store.py":
        # m0 in two versions and m1; m2 was deleted with its row.
        assert served.count(t.memory_facts, tenant) == 3
    elif script == "claude_memory_tool.py":
        # rex.md's three versions; scratch.md and todo.md deleted, the log archived in its session.
        assert served.count(t.evidence, tenant) == 3
        assert served.count(t.tool_results, tenant, state="archived") == 1
    else:
        # Three results recorded, two recovered copies appended; the log and the stock archived.
        assert served.count(t.tool_results, tenant) == 5
        assert served.count(t.tool_results, tenant, state="archived") == 2
