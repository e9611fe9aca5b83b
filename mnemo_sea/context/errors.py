"""The context layer's one error of its own; it is an InvalidInput, so every surface already
answers it as invalid input (REST 422, CLI exit 2, an MCP error result) with its own code."""

from __future__ import annotations

from mnemo_sea.archive import InvalidInput


class ContextOverBudget(InvalidInput):
    """The pinned segments alone exceed the budget; nothing was assembled or changed."""

    code = "context_over_budget"

    def __init__(
        self, *, budget_tokens: int, output_reserve: int, pinned_tokens: int, pinned: dict[str, int]
    ) -> None:
        parts = ", ".join(f"{kind} {n}" for kind, n in pinned.items())
        available = budget_tokens - output_reserve
        super().__init__(
            "budget_tokens",
            f"the pinned segments need {pinned_tokens} tokens ({parts}) but the budget of {budget_tokens} "
            f"leaves {available} after the output reserve of {output_reserve}; raise the budget, lower "
            "the reserve, or shorten the instructions, tools or task state (results of protected classes, "
            "protected_result above, stay verbatim by policy; pinned segments are never cut)",
            budget_tokens=budget_tokens,
            output_reserve=output_reserve,
            available_tokens=available,
            pinned_tokens=pinned_tokens,
            pinned=pinned,
        )
