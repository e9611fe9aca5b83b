"""A LangGraph graph whose long-term memory is the archive: `MnemoStore` as the graph's store.

A node remembers what the user says under the namespace ("memories", <user>) and recalls the
memories closest to it (no model: the graph only stores and searches). Then the store shows what
the archive adds: the versions of a corrected memory and the receipt of a deleted one. Prints a
JSON report; exits 1 when a promise does not hold.

    .venv/bin/python examples/langgraph_store.py --embedder hashing
    .venv/bin/python examples/langgraph_store.py --url http://127.0.0.1:8000   # MNEMO_API_KEY: an agent's

Needs the `[langgraph]` extra (`pip install 'mnemo-sea[langgraph]'`).
"""

from __future__ import annotations

import json
import sys
from typing import Any, TypedDict

from connect import arguments, connect
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from mnemo_sea.integrations.langgraph import MnemoStore


class Turn(TypedDict):
    user: str
    said: str
    recalled: list[str]


def remember_and_recall(state: Turn, *, store: BaseStore) -> dict[str, Any]:
    memories = ("memories", state["user"])
    store.put(memories, f"m{len(store.search(memories, limit=100))}", {"text": state["said"]})
    found = store.search(memories, query=state["said"], limit=2)
    return {"recalled": [item.value["text"] for item in found]}


def main() -> int:
    args = arguments(__doc__ or "")
    failures: list[str] = []
    with connect(args) as handle:
        store = MnemoStore(handle)
        builder = StateGraph(Turn)
        builder.add_node("remember_and_recall", remember_and_recall)
        builder.add_edge(START, "remember_and_recall")
        builder.add_edge("remember_and_recall", END)
        graph = builder.compile(store=store)
        turns = []
        for said in ["My dog Rex is allergic to chicken", "Rex eats salmon kibble", "I live near the ferry"]:
            out = graph.invoke({"user": "ann", "said": said, "recalled": []})
            turns.append({"said": said, "recalled": out["recalled"]})
        if "My dog Rex is allergic to chicken" not in turns[1]["recalled"]:
            failures.append("the allergy was not recalled when Rex's food came up")

        memories = ("memories", "ann")
        store.put(memories, "m0", {"text": "My dog Rex is allergic to chicken and beef"})  # a correction
        history = store.history(memories, "m0")
        versions = [{"version": v.version, "status": v.status, "value": v.value} for v in history]
        if [v["status"] for v in versions] != ["superseded", "active"]:
            failures.append("the correction did not keep the first version")
        receipt = store.delete_with_receipt(memories, "m2")
        if receipt is None or store.get(memories, "m2") is not None:
            failures.append("the deleted memory is still there")
        report = {
            "turns": turns,
            "namespaces": [list(ns) for ns in store.list_namespaces()],
            "versions_of_m0": versions,
            "deleted": None if receipt is None else [list(f) for f in receipt.memory_facts],
            "failures": failures,
        }
    print(json.dumps(report, indent=2, default=str))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
