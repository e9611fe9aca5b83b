"""An OpenAI Agents SDK agent whose conversation lives in mnemo-sea: `MnemoSession`.

    python examples/openai_agents_session.py                        # in process, a temporary folder
    python examples/openai_agents_session.py --url http://127.0.0.1:8000   # a server; MNEMO_API_KEY set

Offline: the model is a stand-in that answers from a script (no network, no API key), so what
runs for real is the SDK's Runner and the session. Turn 1: the agent fetches a long lab log; the
session archives it behind a note. Turn 2: the history the model gets holds the log's stub, not
the log; the model calls `recover_output` with the stub's result id and gets the exact original
back. Then the newest item is popped (the archive keeps it, hidden), and a clear is attempted
with the agent's key: deleting needs an admin, so it is refused and nothing is deleted.
Prints a JSON report; exits 1 if a promise does not hold.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse, TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.usage import Usage
from connect import arguments, connect
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from mnemo_sea.archive import Forbidden
from mnemo_sea.integrations.openai_agents import MnemoSession

set_tracing_disabled(True)  # the SDK would export traces to OpenAI when a key is set


def lab_log() -> str:
    lines = [f"08:{m // 60:02d}:{m % 60:02d} analyser=VetScan-HM5 channel={m % 7} ok" for m in range(400)]
    lines[280] = "08:04:40 analyser=VetScan-HM5 ALT=312 U/L (reference 10-125) FLAG HIGH"
    return "\n".join(lines)


LOG = lab_log()


@function_tool
def fetch_lab_log(patient: str) -> str:
    """Fetch the analyser's log for a patient."""
    return LOG


def say(text: str) -> ResponseOutputMessage:
    part = ResponseOutputText(type="output_text", text=text, annotations=[])
    return ResponseOutputMessage(id="m", type="message", role="assistant", status="completed", content=[part])


def call(name: str, arguments: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", name=name, call_id=call_id, arguments=json.dumps(arguments)
    )


class ScriptedModel(Model):
    """The model's stand-in: each call answers with the next scripted output (a function of what
    it was given), and keeps what it was given."""

    def __init__(self) -> None:
        self.seen: list[list[TResponseInputItem]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        given = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.seen.append(given)
        return ModelResponse(output=self.answer(given), usage=Usage(), response_id=None)

    def answer(self, given: list[Any]) -> list[TResponseOutputItem]:
        last = given[-1]
        if last.get("type") == "function_call_output":
            output = str(last["output"])
            flagged = next((line for line in output.splitlines() if "FLAG" in line), "nothing flagged")
            return [say(f"From the log: {flagged}")]
        question = str(last.get("content"))
        if "log" in question:
            return [call("fetch_lab_log", {"patient": "bella"}, "call-1")]
        # The log is in the history as a stub: bring the original back by the id the stub names.
        stub = next(str(i["output"]) for i in given if i.get("type") == "function_call_output")
        result_id = stub.split("result ", 1)[1].split(" ", 1)[0]
        return [call("recover_output", {"result_id": result_id}, "call-2")]

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("this example runs without streaming")


async def visit(handle: Any) -> dict[str, Any]:
    failures: list[str] = []
    session = MnemoSession(f"visit-{uuid.uuid4().hex[:8]}", handle, large_output_bytes=4_096)
    model = ScriptedModel()
    agent = Agent(name="clinic assistant", model=model, tools=[fetch_lab_log, session.recover_tool()])

    first = await Runner.run(agent, "Fetch Bella's lab log.", session=session)
    second = await Runner.run(agent, "Which value was flagged, exactly?", session=session)
    history = await session.get_items()
    stubs = [
        i for i in history if i.get("type") == "function_call_output" and "archived" in str(i.get("output"))
    ]
    given_turn_2 = model.seen[2]  # the first model call of turn 2
    if any(i.get("output") == LOG for i in given_turn_2):
        failures.append("turn 2 was given the whole log, not its stub")
    recovered = [
        i.get("output")
        for i in model.seen[3]
        if i.get("type") == "function_call_output" and i.get("call_id") == "call-2"
    ]
    if recovered != [LOG]:
        failures.append("recover_output did not give back the exact original log")
    if "ALT=312" not in str(second.final_output):
        failures.append("the answer does not quote the flagged value")

    popped = await session.pop_item()
    after_pop = await session.get_items()
    if len(after_pop) != len(history) - 1 or popped != history[-1]:
        failures.append("pop_item did not hide the newest item")
    try:
        await session.clear_session()
        refused = "not refused"
    except Forbidden as e:
        refused = f"Forbidden: {e}"
    if len(await session.get_items()) != len(after_pop):
        failures.append("a refused clear changed the session")
    return {
        "session": await session.archive_session(),
        "answers": [first.final_output, second.final_output],
        "history_items": len(history),
        "stubs": [str(s["output"])[:160] for s in stubs],
        "recovered_bytes": len(str(recovered[0])) if recovered else 0,
        "log_bytes": len(LOG),
        "popped": popped,
        "clear_as_agent": refused,
        "failures": failures,
    }


def main() -> int:
    args = arguments(__doc__.splitlines()[0])
    with connect(args) as handle:
        report = asyncio.run(visit(handle))
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
