"""The agent's tools through the SDK's client, in memory: what is published, what each call does,
and the one error shape every failure takes."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_helpers import AMOXICILLIN, CLINIC, payload, with_client

from mnemo_sea.archive import NotFound, Principal, Role, Sensitivity
from mnemo_sea.mcp import TOOLS, build_server
from mnemo_sea.system.mnemo import Mnemo

TOOL_NAMES = {
    "search_evidence",
    "record_result",
    "archive_results",
    "recover_result",
    "read_result",
    "live_context",
    "remember",
    "check_citations",
    "assemble_context",
    "update_task_state",
    "get_task_state",
    "curate_context",
}
CBC = "CBC 2024-05-01: WBC 7.1 (normal), ALT 112 U/L (high), creatinine 1.1 mg/dL (normal)"
WEIGHT = "Owner confirms Rex weighs 31 kg"


def test_all_tools_are_listed_with_descriptions_and_typed_schemas(mnemo: Mnemo) -> None:
    async def body(client: Client) -> None:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == TOOL_NAMES
        assert client.instructions is not None and "check_citations" in client.instructions
        for tool in listed.values():
            assert tool.description and len(tool.description) > 200, tool.name
            schema = tool.input_schema
            assert schema["type"] == "object" and schema["additionalProperties"] is False
            for name, field in schema["properties"].items():
                assert field.get("description"), f"{tool.name}.{name} has no description"
        # The descriptions teach the protocol where the model reads it.
        archive = listed["archive_results"].description or ""
        assert "ONE call" in archive and "note" in archive and "recover_result" in archive
        assert "protected" in archive and "citable" in archive
        recover = listed["recover_result"].description or ""
        assert "sha256" in recover and "historical" in recover and "staleness" in recover
        assert "check_citations" in (listed["search_evidence"].description or "")
        assert set(listed["archive_results"].input_schema["required"]) == {"session_id", "targets"}
        assert listed["search_evidence"].annotations is not None
        assert listed["search_evidence"].annotations.read_only_hint is True

    with_client(mnemo, CLINIC, body)


def test_record_archive_live_recover_round_trip(mnemo: Mnemo, session_id: str) -> None:
    note = "CBC of 2024-05-01: normal except ALT 112 (high); relevant to drug dosing"

    async def body(client: Client) -> None:
        first = payload(
            await client.call_tool(
                "record_result",
                {
                    "session_id": session_id,
                    "tool_name": "lab_results",
                    "content": CBC,
                    "arguments": {"patient": "rex"},
                },
            )
        )
        second = payload(
            await client.call_tool(
                "record_result",
                {
                    "session_id": session_id,
                    "tool_name": "ask_owner",
                    "content": WEIGHT,
                    "policy_class": "user_confirmed_fact",
                },
            )
        )
        assert (first["result_id"], second["result_id"]) == ("r1", "r2")
        assert first["content_sha256"] == hashlib.sha256(CBC.encode()).hexdigest()
        assert (first["protected"], second["protected"]) == (False, True)

        receipt = payload(
            await client.call_tool(
                "archive_results",
                {"session_id": session_id, "targets": [{"result_id": "r1", "note": note}]},
            )
        )
        assert receipt["archived"] == ["r1"] and receipt["replayed"] is False

        live = payload(await client.call_tool("live_context", {"session_id": session_id}))
        items = {item["result_id"]: item for item in live["items"]}
        assert items["r1"]["state"] == "archived" and items["r1"]["note"] == note
        assert items["r2"]["state"] == "live" and items["r2"]["protected"] is True
        assert note in live["text"] and '<archived_result id="r1"' in live["text"]
        assert "ALT 112 U/L" not in live["text"]  # the original left the context
        assert WEIGHT in live["text"]
        assert live["text"].index('id="r1"') < live["text"].index('id="r2"')  # the stub stays in place

        recovered = payload(
            await client.call_tool("recover_result", {"session_id": session_id, "result_id": "r1"})
        )
        assert recovered["content"] == CBC and recovered["content_base64"] is None
        assert recovered["content_sha256"] == hashlib.sha256(CBC.encode()).hexdigest()
        assert recovered["size"] == len(CBC.encode())
        assert (recovered["result_id"], recovered["recovered_from"]) == ("r3", "r1")
        assert recovered["label"] == "historical" and "historical" in recovered["rendered"]
        assert recovered["arguments"] == {"patient": "rex"}

        # Looking is not recovering: the archived original comes back in the answer only.
        looked = payload(
            await client.call_tool(
                "read_result", {"session_id": session_id, "result_id": "r1", "with_content": True}
            )
        )
        assert (looked["result_id"], looked["state"], looked["content"]) == ("r1", "archived", CBC)
        after = payload(await client.call_tool("live_context", {"session_id": session_id}))
        assert [i["result_id"] for i in after["items"]] == ["r1", "r2", "r3"]  # nothing appended

        # Protected evidence never leaves the context, and the rejection names why.
        refused = await client.call_tool(
            "archive_results",
            {"session_id": session_id, "targets": [{"result_id": "r2", "note": "weight 31 kg"}]},
        )
        assert refused.is_error
        error = payload(refused)
        assert error["error"] == "batch_rejected"
        assert [(t["result_id"], t["status"]) for t in error["targets"]] == [("r2", "protected")]

    with_client(mnemo, CLINIC, body)


def test_recover_result_brings_back_an_excerpt_or_names_the_original_s_size(
    mnemo: Mnemo, session_id: str
) -> None:
    report = "".join(f"section {n}: nothing to see\n" for n in range(1, 60)).replace(
        "section 42: nothing to see", "section 42: ALT 112 U/L (high)"
    )

    async def body(client: Client) -> None:
        await client.call_tool(
            "record_result", {"session_id": session_id, "tool_name": "lab_report", "content": report}
        )
        await client.call_tool(
            "archive_results",
            {"session_id": session_id, "targets": [{"result_id": "r1", "note": "lab report"}]},
        )
        found = payload(
            await client.call_tool(
                "recover_result",
                {"session_id": session_id, "result_id": "r1", "match": "alt 112", "around": 1},
            )
        )
        wanted = "section 41: nothing to see\nsection 42: ALT 112 U/L (high)\nsection 43: nothing to see\n"
        assert found["content"] == wanted and found["size"] == len(wanted.encode())
        assert found["content_sha256"] == hashlib.sha256(report.encode()).hexdigest()
        start = report.encode().index(wanted.encode())
        assert found["excerpt_sha256"] == hashlib.sha256(wanted.encode()).hexdigest()
        assert found["excerpt"] == {
            "start": start,
            "end": start + len(wanted.encode()),
            "first_line": 41,
            "last_line": 43,
        }
        assert "lines 41-43" in found["rendered"]

        refused = await client.call_tool(
            "recover_result", {"session_id": session_id, "result_id": "r1", "lines": [58, 70]}
        )
        assert refused.is_error
        error = payload(refused)
        assert error["error"] == "invalid_span" and error["category"] == "invalid_input"
        assert "r1 has 59 lines" in error["message"]
        live = payload(await client.call_tool("live_context", {"session_id": session_id}))
        assert [item["result_id"] for item in live["items"]] == ["r1", "r2"]  # nothing appended

    with_client(mnemo, CLINIC, body)


def test_curate_context_archives_what_is_due_and_recalls_the_need_in_one_call(
    mnemo: Mnemo, session_id: str
) -> None:
    listing = "\n".join(f"src/module_{n}.py: 120 lines" for n in range(400)) + "\nsrc/billing.py: 99 lines"

    async def body(client: Client) -> None:
        for tool, content in (("list_files", listing), ("ask_owner", "fine"), ("notes", "plan")):
            await client.call_tool(
                "record_result",
                {
                    "session_id": session_id,
                    "tool_name": tool,
                    "content": content,
                    "arguments": {"dir": "src"},
                },
            )
        first = payload(
            await client.call_tool(
                "curate_context", {"session_id": session_id, "large_result_tokens": 500, "keep_recent": 2}
            )
        )
        assert [a["result_id"] for a in first["archived"]] == ["r1"] and first["recall"] is None
        assert first["archived"][0]["reason"] == "large" and first["receipt"]["archived"] == ["r1"]
        second = payload(
            await client.call_tool(
                "curate_context", {"session_id": session_id, "need": "billing.py line count", "around": 0}
            )
        )
        recall = second["recall"]
        assert recall["status"] == "recovered" and recall["result_id"] == "r1"
        assert recall["recovered"]["content"] == "src/billing.py: 99 lines"
        assert second["archived"] == []  # the excerpt is newest: it stays in view

    with_client(mnemo, CLINIC, body)


def test_time_sensitive_result_comes_back_with_a_staleness_warning(mnemo: Mnemo, session_id: str) -> None:
    async def body(client: Client) -> None:
        args = {
            "session_id": session_id,
            "tool_name": "stock",
            "content": "12 boxes",
            "policy_class": "stock",
        }
        await client.call_tool("record_result", args)
        await client.call_tool(
            "archive_results",
            {"session_id": session_id, "targets": [{"result_id": "r1", "note": "12 boxes in stock"}]},
        )
        recovered = payload(
            await client.call_tool("recover_result", {"session_id": session_id, "result_id": "r1"})
        )
        assert "re-query" in recovered["staleness_warning"]

    with_client(mnemo, CLINIC, body)


def test_live_context_withholds_what_is_above_the_readers_clearance(mnemo: Mnemo, session_id: str) -> None:
    senior = Principal("clinic", "agent-2", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
    secret = {"session_id": session_id, "tool_name": "psych_eval", "arguments": {"q": "owner history"}}

    async def record(client: Client) -> None:
        await client.call_tool(
            "record_result", {**secret, "content": "confidential assessment", "sensitivity": "confidential"}
        )
        await client.call_tool(
            "record_result", {"session_id": session_id, "tool_name": "t", "content": "open"}
        )
        await client.call_tool(
            "archive_results",
            {"session_id": session_id, "targets": [{"result_id": "r1", "note": "assessment: owner history"}]},
        )

    async def read(client: Client) -> None:
        live = payload(await client.call_tool("live_context", {"session_id": session_id}))
        assert live["items"][0] == {
            "result_id": "r1",
            "tool_name": "psych_eval",
            "state": "archived",
            "withheld": True,
        }
        assert live["items"][1]["state"] == "live"
        shown = json.dumps(live)
        assert "assessment" not in shown and "owner history" not in shown

    with_client(mnemo, senior, record)
    with_client(mnemo, CLINIC, read)


def test_search_finds_ingested_evidence_and_archived_notes(mnemo: Mnemo, session_id: str) -> None:
    async def body(client: Client) -> None:
        found = payload(await client.call_tool("search_evidence", {"query": "amoxicillin dose for dogs"}))
        assert found["status"] == "results"
        top = found["hits"][0]
        assert (top["evidence_id"], top["locator"]) == ("amox-dose", "p. 12")
        assert "10 mg/kg" in top["snippet"] and top["snippet"] in AMOXICILLIN

        # Another tenant's evidence is not there at all.
        other = payload(await client.call_tool("search_evidence", {"query": "blue widgets price"}))
        assert all(hit["evidence_id"] != "widget-price" for hit in other["hits"])

        await client.call_tool(
            "record_result", {"session_id": session_id, "tool_name": "xray", "content": "thorax clear"}
        )
        note = "thorax radiograph: clear, no masses; rules out metastasis"
        await client.call_tool(
            "archive_results",
            {"session_id": session_id, "targets": [{"result_id": "r1", "note": note}]},
        )
        notes = payload(
            await client.call_tool(
                "search_evidence", {"query": "radiograph metastasis", "kinds": ["tool_result"]}
            )
        )
        top = notes["hits"][0]  # other tests' archived notes may follow: the system is shared
        assert (top["kind"], top["locator"], top["snippet"]) == ("tool_result", f"{session_id}/r1", note)

    with_client(mnemo, CLINIC, body)


def test_remember_stores_a_fact_and_keeps_inferences_as_candidates(mnemo: Mnemo) -> None:
    async def body(client: Client) -> None:
        stored = payload(
            await client.call_tool(
                "remember",
                {
                    "owner": "owner-rex",
                    "key": "allergy",
                    "value": "penicillin (hives)",
                    "provenance": "user_claim",
                },
            )
        )
        assert stored["persisted"] is True and stored["fact"]["value"] == "penicillin (hives)"
        guess = payload(
            await client.call_tool(
                "remember",
                {"owner": "owner-rex", "key": "diet", "value": "grain-free", "provenance": "model_inference"},
            )
        )
        assert guess["persisted"] is False

        found = payload(
            await client.call_tool("search_evidence", {"query": "penicillin allergy", "kinds": ["memory"]})
        )
        # The system is shared: other tests' memory facts may follow, so only this owner's count.
        mine = [h["snippet"] for h in found["hits"] if h["locator"].startswith("owner-rex/")]
        assert mine == ["allergy: penicillin (hives)"]

    with_client(mnemo, CLINIC, body)
    fact = mnemo.current(CLINIC, "owner-rex", "allergy")
    assert fact is not None and fact.value == "penicillin (hives)" and fact.provenance == "user_claim"
    assert mnemo.current(CLINIC, "owner-rex", "diet") is None


def test_check_citations_flags_invented_and_misquoted_citations(mnemo: Mnemo) -> None:
    async def body(client: Client) -> None:
        report = payload(
            await client.call_tool(
                "check_citations",
                {
                    "citations": [
                        {"evidence_id": "amox-dose", "quote": "10 mg/kg by mouth twice daily"},
                        {"evidence_id": "amox-dose-2019", "quote": "20 mg/kg once daily"},
                        {"evidence_id": "amox-dose", "quote": "20 mg/kg once daily"},
                        {"evidence_id": "widget-price", "quote": "4 EUR"},  # another tenant's
                    ]
                },
            )
        )
        verdicts = [c["verdict"] for c in report["citations"]]
        assert verdicts == ["ok", "unresolved", "quote_not_found", "unresolved"]
        assert report["precision"] == 0.25

    with_client(mnemo, CLINIC, body)


# ---- errors: one shape, never a crash -----------------------------------------------------------


def test_archiving_an_unknown_id_rejects_the_whole_batch_with_each_status(
    mnemo: Mnemo, session_id: str
) -> None:
    async def body(client: Client) -> None:
        await client.call_tool("record_result", {"session_id": session_id, "tool_name": "t", "content": "a"})
        result = await client.call_tool(
            "archive_results",
            {
                "session_id": session_id,
                "targets": [{"result_id": "r1", "note": "held a"}, {"result_id": "r7", "note": "held b"}],
            },
        )
        assert result.is_error
        error = payload(result)
        assert error["error"] == "batch_rejected" and "nothing was archived" in error["message"]
        assert [(t["result_id"], t["status"]) for t in error["targets"]] == [("r1", "ok"), ("r7", "unknown")]
        live = payload(await client.call_tool("live_context", {"session_id": session_id}))
        assert [item["state"] for item in live["items"]] == ["live"]  # nothing changed

    with_client(mnemo, CLINIC, body)


def test_a_reader_may_search_but_not_record(mnemo: Mnemo, session_id: str) -> None:
    reader = Principal("clinic", "nurse-1", frozenset({Role.READER}))

    async def body(client: Client) -> None:
        found = await client.call_tool("search_evidence", {"query": "amoxicillin"})
        assert not found.is_error
        refused = await client.call_tool(
            "record_result", {"session_id": session_id, "tool_name": "t", "content": "x"}
        )
        assert refused.is_error
        error = payload(refused)
        assert error["error"] == "forbidden" and error["needed_role"] == "agent"

    with_client(mnemo, reader, body)
    with pytest.raises(NotFound):  # the refused call recorded nothing
        mnemo.live_view(CLINIC, session_id)


def test_bad_input_is_invalid_input_naming_the_field(mnemo: Mnemo, session_id: str) -> None:
    async def body(client: Client) -> None:
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("record_result", {"session_id": session_id, "tool_name": "t"}, "content"),
            ("search_evidence", {"query": "x", "limit": "many"}, "limit"),
            ("archive_results", {"session_id": session_id, "targets": []}, "targets"),
            ("live_context", {"session_id": session_id, "sesion": "typo"}, "sesion"),
            ("remember", {"owner": "o", "key": "k", "value": "v", "provenance": "rumour"}, "provenance"),
            ("recover_result", {"session_id": session_id, "result_id": "x3"}, "result_id"),
            ("live_context", {"session_id": "has spaces"}, "session_id"),
        ]
        for tool, arguments, field in cases:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, tool
            error = payload(result)
            assert error["error"] == "invalid_input", (tool, error)
            assert field in error["message"], (tool, error)
            assert "Traceback" not in error["message"]

    with_client(mnemo, CLINIC, body)


def test_unknown_tools_and_unexpected_failures_are_tool_errors(mnemo: Mnemo) -> None:
    def broken(_ctx: Any) -> Principal:
        raise RuntimeError("secret internal detail")

    async def main() -> None:
        async with Client(build_server(mnemo, broken)) as client:
            unknown = await client.call_tool("delete_everything", {})
            assert unknown.is_error and payload(unknown)["error"] == "unknown_tool"
            assert set(payload(unknown)["tools"]) == {tool.name for tool in TOOLS}
            crashed = await client.call_tool("live_context", {"session_id": "s1"})
            assert crashed.is_error
            error = payload(crashed)
            assert error["error"] == "internal_error" and "secret" not in error["message"]

    anyio.run(main)


def test_record_result_retried_with_its_idempotency_key_records_once(mnemo: Mnemo, session_id: str) -> None:
    args = {"session_id": session_id, "tool_name": "lab_results", "content": CBC, "idempotency_key": "rec-1"}

    async def body(client: Client) -> None:
        first = payload(await client.call_tool("record_result", args))
        again = payload(await client.call_tool("record_result", args))
        assert again["result_id"] == first["result_id"]
        other = await client.call_tool("record_result", {**args, "content": "something else"})
        assert other.is_error and payload(other)["error"] == "idempotency_mismatch"

    with_client(mnemo, CLINIC, body)
    assert len(mnemo.archive.list_results(CLINIC, session_id)) == 1


def test_tool_arguments_at_the_field_limit_are_recorded_over_mcp(mnemo: Mnemo, session_id: str) -> None:
    # The call's arguments object wraps the field a level deeper; the document allowance covers
    # it, so arguments Python accepts (JSON_DEPTH levels) are accepted here too, one more are not.
    from mnemo_sea.archive.rules.limits import JSON_DEPTH

    def arguments(levels: int) -> dict[str, Any]:
        deep: Any = []
        for _ in range(levels - 2):
            deep = [deep]
        return {"a": deep}  # `levels` deep: the object and the arrays in it

    answers: list[dict[str, Any]] = []

    async def body(client: Client) -> None:
        for levels in (JSON_DEPTH, JSON_DEPTH + 1):
            call = {
                "session_id": session_id,
                "tool_name": "t",
                "content": "x",
                "arguments": arguments(levels),
            }
            answers.append(payload(await client.call_tool("record_result", call)))

    with_client(mnemo, CLINIC, body)
    at_limit, over = answers
    assert "error" not in at_limit, at_limit
    assert over["error"] == "invalid_input" and f"deeper than {JSON_DEPTH} levels" in str(over["problems"]), (
        over
    )
    assert len(mnemo.archive.list_results(CLINIC, session_id)) == 1


def test_arguments_nested_past_the_limit_are_refused_and_nothing_is_recorded(
    mnemo: Mnemo, session_id: str
) -> None:
    from sqlalchemy import func, select

    from mnemo_sea.archive.storage import schema as t
    from mnemo_sea.system.json_text import MAX_JSON_DEPTH

    deep: Any = []
    for _ in range(150):  # deeper than the limit, shallower than the SDK's own parser allows
        deep = [deep]
    answers: list[dict[str, Any]] = []

    async def body(client: Client) -> None:
        for name, arguments in (
            (
                "record_result",
                {"session_id": session_id, "tool_name": "t", "content": "x", "arguments": {"a": deep}},
            ),
            ("search_evidence", {"query": "x", "filters": deep}),
        ):
            answers.append(payload(await client.call_tool(name, arguments)))

    with_client(mnemo, CLINIC, body)
    for answer in answers:
        assert answer["error"] == "json_too_deep" and answer["category"] == "invalid_input", answer
        assert answer["limit"] == MAX_JSON_DEPTH and answer["field"] == "arguments"
    with mnemo.archive.store.read() as conn:  # raw state: nothing recorded
        stored = (
            select(func.count()).select_from(t.tool_results).where(t.tool_results.c.session_id == session_id)
        )
        assert conn.execute(stored).scalar_one() == 0


def test_search_shows_each_legs_score_and_a_floor_leaves_out_hits_under_it(mnemo: Mnemo) -> None:
    async def body(client: Client) -> None:
        query = {"query": "amoxicillin dose for dogs"}
        (top,) = payload(await client.call_tool("search_evidence", {**query, "limit": 1}))["hits"]
        assert top["evidence_id"] == "amox-dose" and top["bm25_rank"] == 1 and top["bm25_score"] > 0
        assert -1 <= top["dense_score"] <= 1 and top["relevance"] >= top["dense_score"]
        kept = payload(await client.call_tool("search_evidence", {**query, "min_score": top["relevance"]}))
        assert [h["evidence_id"] for h in kept["hits"]] == ["amox-dose"]
        over = {"query": "cats", "min_score": 1.0}  # no term in common, nothing that similar
        assert payload(await client.call_tool("search_evidence", over))["status"] == "no_match"
        for refused in ({**query, "min_score": 1.5}, {**query, "min_score": 0.5, "mode": "bm25"}):
            result = await client.call_tool("search_evidence", refused)
            assert result.is_error, refused
            error = payload(result)
            assert error["category"] == "invalid_input" and "min_score" in error["message"], error

    with_client(mnemo, CLINIC, body)
