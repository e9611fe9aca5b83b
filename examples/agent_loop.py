"""An agent's loop over mnemo-sea: record tool results, archive the bulky ones with a note,
recover an exact original when it is needed again, and assemble each turn's context under a
token budget.

    python examples/agent_loop.py                        # in process, a temporary data folder
    python examples/agent_loop.py --url http://127.0.0.1:8000   # a server; MNEMO_API_KEY set

The same calls run in process and through `mnemo_sea.client.MnemoClient` (see connect.py). A
veterinary visit: a long lab log, a stock check (time-sensitive: its recovered copy carries a
staleness warning) and a vet's approval (protected: the archive refuses to set it aside).
Prints what each turn's context holds and costs; exits 1 if a promise does not hold (the
recovered bytes differ from what was recorded, the protected result was archived, or the
context does not fit its budget).
"""

from __future__ import annotations

import hashlib
import json
import sys

from connect import arguments, connect

from mnemo_sea.archive import BatchRejected

SESSION = "visit-2026-12-01-bella"
BUDGET = 16_000  # tokens the model may receive this turn, its answer's reserve included


def lab_log() -> str:
    lines = [
        f"2026-12-01T08:{m // 60:02d}:{m % 60:02d} analyser=VetScan-HM5 channel={m % 7} ok"
        for m in range(400)
    ]
    lines[280] = "2026-12-01T08:04:40 analyser=VetScan-HM5 ALT=312 U/L (reference 10-125) FLAG HIGH"
    return "\n".join(lines)


def main() -> int:
    args = arguments(__doc__.splitlines()[0])
    failures: list[str] = []
    turns: list[dict[str, object]] = []
    with connect(args) as memory:

        def turn(label: str, must_show: str | None = None, **query: object) -> None:
            ctx = memory.context(
                SESSION, budget_tokens=BUDGET, instructions="You are the clinic's assistant.", **query
            )
            if ctx.used_tokens > BUDGET:
                failures.append(f"{label}: {ctx.used_tokens} tokens over a budget of {BUDGET}")
            if must_show is not None and must_show not in ctx.text:
                failures.append(f"{label}: the context does not show {must_show!r}")
            turns.append(
                {
                    "turn": label,
                    "tokens": ctx.used_tokens,
                    "left_out": [item.ids for item in ctx.left_out],
                    "archive_candidates": [c.result_id for c in ctx.candidates],
                }
            )

        log = lab_log()
        lab = memory.record(SESSION, "lab.fetch_log", log, arguments={"patient": "bella"})
        stock = memory.record(
            SESSION, "pharmacy.stock", "milbemycin oxime 2.5 mg: 14 in stock", policy_class="stock"
        )
        approval = memory.record(
            SESSION,
            "vet.approval",
            "Dr. Lin approved milbemycin oxime for Bella (MDR1 +/-), 2026-12-01",
            policy_class="vet_approval",
        )
        turn("1: everything live", must_show="ALT=312")

        # The log is what crowds the budget: set it aside behind a note that says what it held.
        note = "lab log 08:00-08:06; ALT flagged HIGH at 08:04:40"
        memory.archive_results(SESSION, [(lab.result_id, note)])
        memory.archive_results(SESSION, [(stock.result_id, "milbemycin in stock at 08:30")])
        try:
            memory.archive_results(SESSION, [(approval.result_id, "approval")])
            failures.append("the vet's approval was archived: protected results must stay live")
        except BatchRejected as refused:
            turns.append({"refused": str(refused).splitlines()[0]})
        turn("2: log and stock archived", must_show="ALT flagged HIGH")  # the note

        # A later question needs the exact ALT line: recover the original, hash-verified.
        recovered = memory.recover(SESSION, lab.result_id)
        exact = recovered.content == log.encode()
        if not exact or hashlib.sha256(recovered.content).hexdigest() != lab.content_sha256:
            failures.append("the recovered log differs from the recorded one")
        again = memory.recover(SESSION, stock.result_id)
        turns.append({"stock_warning": again.staleness_warning})
        turn("3: log recovered, with evidence", must_show="ALT=312", query="ALT flagged high")

    print(json.dumps({"turns": turns, "failures": failures}, ensure_ascii=False, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
