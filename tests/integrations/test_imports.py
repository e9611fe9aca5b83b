"""The frameworks load only with their integration, and a missing one says which extra to install.

`import mnemo_sea`, every surface and the integrations' shared module load neither framework
(the import-linter contract checks every module statically; this checks what really loads).
An integration loads its own framework and not the other, nor the index engine, the model or
the tokenizer: a pipeline searching a remote server pays for none of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FRAMEWORKS = ("langchain_core", "langsmith", "llama_index", "agents", "langgraph", "anthropic")
ENGINE = ("torch", "sentence_transformers", "qdrant_client", "qdrant_edge", "tiktoken", "mnemo_sea.retrieval")


def loaded_after(imports: str) -> list[str]:
    """Top-level names (and mnemo_sea.retrieval) of the modules loaded by `imports` in a fresh
    interpreter."""
    code = (
        f"import json, sys\n{imports}\n"
        "names = {m.split('.')[0] for m in sys.modules}\n"
        "names |= {m for m in sys.modules if m.startswith('mnemo_sea.')}\n"
        "print(json.dumps(sorted(names)))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False, cwd=REPO
    )
    assert run.returncode == 0, run.stderr
    return list(json.loads(run.stdout))


def test_the_package_its_surfaces_and_the_shared_module_load_no_framework() -> None:
    loaded = loaded_after(
        "import mnemo_sea, mnemo_sea.integrations, mnemo_sea.integrations.search\n"
        "import mnemo_sea.integrations.claude_context, mnemo_sea.integrations.plans\n"
        "import mnemo_sea.system.mnemo, mnemo_sea.rest.app, mnemo_sea.mcp.server, mnemo_sea.cli.app"
    )
    assert "mnemo_sea.cli.app" in loaded  # the probe saw the imports
    assert [name for name in FRAMEWORKS if name in loaded] == []


@pytest.mark.parametrize(
    ("module", "framework", "other"),
    [
        ("langchain", "langchain_core", "llama_index"),
        ("llama_index", "llama_index", "langchain_core"),
        ("openai_agents", "agents", "langchain_core"),
        ("langgraph", "langgraph", "llama_index"),
        ("langchain_vectorstore", "langchain_core", "llama_index"),
        ("llama_index_vectorstore", "llama_index", "langchain_core"),
        ("claude_memory", "anthropic", "langchain_core"),
    ],
)
def test_an_integration_loads_its_framework_only(module: str, framework: str, other: str) -> None:
    loaded = loaded_after(f"import mnemo_sea.integrations.{module}")
    assert framework in loaded
    assert other not in loaded
    assert [name for name in ENGINE if name in loaded] == []


@pytest.mark.parametrize(
    ("module", "framework", "package", "extra"),
    [
        ("langchain", "langchain_core", "langchain-core", "langchain"),
        ("llama_index", "llama_index", "llama-index-core", "llama-index"),
        ("openai_agents", "agents", "openai-agents", "openai-agents"),
        ("langgraph", "langgraph", "langgraph", "langgraph"),
        ("langchain_vectorstore", "langchain_core", "langchain-core", "langchain"),
        ("llama_index_vectorstore", "llama_index", "llama-index-core", "llama-index"),
        ("claude_memory", "anthropic", "anthropic", "anthropic"),
    ],
)
def test_a_missing_framework_names_the_extra_to_install(
    module: str, framework: str, package: str, extra: str
) -> None:
    # A None entry in sys.modules makes every import of that name fail, as if it were not installed.
    code = (
        f"import sys; sys.modules[{framework!r}] = None\n"
        f"try:\n    import mnemo_sea.integrations.{module}\n"
        "except ImportError as e:\n    print(e)\nelse:\n    print('imported')"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True, cwd=REPO
    )
    assert run.stdout.startswith(
        f"mnemo_sea.integrations.{module} needs {package}: pip install 'mnemo-sea[{extra}]'"
    ), run.stdout
