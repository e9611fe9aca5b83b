"""What importing the client costs, and that both clients offer every operation alike.

`import mnemo_sea.client` must not load the index engine, the model or the server (a RAG
pipeline in another process than the archive pays for none of them); the layers it reads its
types from load those on first use only, and every name they always offered still imports.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from client_helpers import Served

import mnemo_sea.context
import mnemo_sea.retrieval
from mnemo_sea.client import AsyncMnemoClient, MnemoClient, calls

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "qdrant_client", "qdrant_edge", "sentence_transformers", "onnxruntime")


def loaded_after(statement: str) -> list[str]:
    """The top-level modules a fresh interpreter has loaded after `statement`."""
    code = (
        f"import json, sys\n{statement}\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert proc.returncode == 0, proc.stderr
    found: list[str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


def test_importing_the_client_loads_no_engine_no_model_and_no_server() -> None:
    loaded = loaded_after("import mnemo_sea.client\nfrom mnemo_sea.client import MnemoClient")
    assert not [m for m in HEAVY if m in loaded]
    assert "fastapi" not in loaded and "uvicorn" not in loaded and "redis" not in loaded
    assert "httpx" in loaded  # the check itself sees what is loaded


def test_the_check_sees_an_engine_when_one_is_loaded() -> None:
    assert "qdrant_edge" in loaded_after("from mnemo_sea.retrieval import EdgeIndex")


@pytest.mark.parametrize("package", [mnemo_sea.retrieval, mnemo_sea.context], ids=lambda p: p.__name__)
def test_every_name_the_layers_offered_still_imports(package: object) -> None:
    names = package.__all__  # type: ignore[attr-defined]
    assert set(names) <= set(dir(package))
    for name in names:
        assert getattr(package, name) is not None, name
    exec(f"from {package.__name__} import *", {})  # type: ignore[attr-defined]


def test_both_clients_offer_every_operation_with_one_signature() -> None:
    for name, plan in calls.OPERATIONS.items():
        sync, run = getattr(MnemoClient, name), getattr(AsyncMnemoClient, name)
        assert not inspect.iscoroutinefunction(sync) and inspect.iscoroutinefunction(run), name
        wanted = list(inspect.signature(plan).parameters.values())
        for method in (sync, run):
            assert list(inspect.signature(method).parameters.values())[1:] == wanted, name
        assert sync.__doc__ == run.__doc__ == plan.__doc__ and plan.__doc__, name
    offered = {n for n in vars(MnemoClient) if not n.startswith("_") and callable(getattr(MnemoClient, n))}
    assert offered - {"close"} == set(calls.OPERATIONS)
    offered = {
        n for n in vars(AsyncMnemoClient) if not n.startswith("_") and callable(getattr(AsyncMnemoClient, n))
    }
    assert offered - {"aclose"} == set(calls.OPERATIONS)


def test_the_readme_example_runs(served: Served) -> None:
    """The README's example, as printed, against a real server (its key and URL from the env)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### The Python client", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env |= {"MNEMO_URL": served.base_url, "MNEMO_API_KEY": served.key(f"t-{uuid.uuid4().hex[:12]}", "agent")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", example], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert proc.returncode == 0, proc.stderr
    hit, request_id = proc.stdout.strip().splitlines()
    assert hit.endswith(" 1 Amoxicillin: 10 mg/kg twice daily.") and len(request_id) == 32
