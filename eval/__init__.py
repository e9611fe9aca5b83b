"""The evaluation and benchmark harnesses (shipped as `mnemo_sea.eval`; see eval/README.md)."""

# This folder ships as mnemo_sea.eval (the link mnemo_sea/eval). Imported as `eval` from
# the repository root it would load a second copy of every class, and isinstance checks and
# except clauses would stop matching across the two; so only the one name is accepted.
if __name__ != "mnemo_sea.eval":
    raise ImportError(
        f"import this layer as mnemo_sea.eval, not {__name__} (the repository root is not a package root)"
    )
