"""`pip install mnemo-sea` is the slim set; the heavy parts are extras (mnemo_sea/extras.py).

Proven here:
- the slim set, and the slim set with either retriever extra, pulls none of torch, onnx,
  onnxruntime, matplotlib, psycopg or redis (the requirement closure, from the installed
  distributions' own metadata);
- every third-party module the code imports is in the slim set or in the extra the table names,
  and that extra's closure holds the module's distribution;
- a missing extra is named, in the library and on the command line (a module hidden from a
  process stands for the module not installed);
- the wheel, installed with the slim set into a fresh venv by pip from the package index,
  runs the typed client (sync and async) and the LangChain retriever against a live `serve`,
  with no heavy package installed and none imported.
"""

from __future__ import annotations

import ast
import json
import signal
import socket
import subprocess
import sys
import time
import tomllib
import venv
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from wheels import build_wheel, clean_env, run

from mnemo_sea.extras import EXTRA_OF_MODULE, ExtraMissing, extra_missing

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
SELF = canonicalize_name(PROJECT["name"])
# What the issue names as too heavy for a client, with the binary parts that come with them.
HEAVY = {"torch", "onnx", "onnxruntime", "matplotlib", "psycopg", "psycopg-binary", "redis", "hiredis"}


def _own_requirements(extras: Iterable[str]) -> list[Requirement]:
    wanted = [*PROJECT["dependencies"]]
    for extra in extras:
        wanted += PROJECT["optional-dependencies"][extra]
    return [Requirement(r) for r in wanted]


def closure(extras: Iterable[str] = ()) -> set[str]:
    """Every distribution `pip install 'mnemo-sea[extras]'` installs besides mnemo-sea, read
    from pyproject.toml and from the installed distributions' metadata (markers evaluated here)."""
    found: set[str] = set()
    todo: list[tuple[Requirement, str]] = [(r, "") for r in _own_requirements(extras)]
    seen_extras: set[tuple[str, str]] = set()
    while todo:
        req, from_extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": from_extra}):
            continue
        name = canonicalize_name(req.name)
        if name == SELF:  # `mnemo-sea[embedded]` inside another extra
            todo += [(r, "") for r in _own_requirements(req.extras)]
            continue
        for extra in ("", *sorted(req.extras)):
            if (name, extra) in seen_extras:
                continue
            seen_extras.add((name, extra))
            found.add(name)
            todo += [(Requirement(r), extra) for r in metadata.requires(name) or []]
    return found


def test_the_slim_set_and_the_retriever_extras_pull_no_heavy_package() -> None:
    for extras in ((), ("langchain",), ("llama-index",)):
        pulled = closure(extras)
        assert pulled & HEAVY == set(), f"mnemo-sea{list(extras)} pulls {sorted(pulled & HEAVY)}"
    # The check can fail: the extras that must hold them do.
    assert {"torch", "onnx", "onnxruntime"} <= closure(["embedded"])
    assert {"psycopg", "redis"} <= closure(["server"]) and "matplotlib" in closure(["chart"])


def _distribution_of(module: str) -> str:
    return canonicalize_name(metadata.packages_distributions()[module][0])


def test_each_module_of_the_table_comes_with_its_extra_and_not_with_the_slim_set() -> None:
    base = closure()
    for module, extra in EXTRA_OF_MODULE.items():
        assert extra in PROJECT["optional-dependencies"], f"{module}: no extra {extra!r} in pyproject.toml"
        dist = _distribution_of(module)
        assert dist in closure([extra]), f"{module} ({dist}) does not come with the {extra!r} extra"
        assert dist not in base, f"{module} ({dist}) is in the slim set: it needs no extra"


def _third_party_imports() -> dict[str, str]:
    """Top-level name of every third-party module the shipped code imports -> one file importing it."""
    found: dict[str, str] = {}
    for root in ("mnemo_sea", "archive", "retrieval", "eval"):
        for path in sorted((REPO / root).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top != "mnemo_sea":
                        found.setdefault(top, str(path.relative_to(REPO)))
    return found


def test_every_third_party_import_is_in_the_slim_set_or_named_by_the_table() -> None:
    base = closure()
    imports = _third_party_imports()
    assert {"sqlalchemy", "httpx", "torch", "fastapi"} <= set(imports)  # the scan sees the code
    for module, where in imports.items():
        if module in EXTRA_OF_MODULE:
            continue
        assert _distribution_of(module) in base, (
            f"{where} imports {module}, which the slim set lacks: add it to an extra and to "
            "mnemo_sea/extras.py's table, or to the slim set"
        )


def test_a_missing_module_of_an_extra_names_the_extra() -> None:
    missing = extra_missing(ModuleNotFoundError("No module named 'uvicorn'", name="uvicorn"), "`serve`")
    assert isinstance(missing, ExtraMissing) and isinstance(missing, ImportError)
    assert (missing.extra, missing.module) == ("server", "uvicorn")
    assert "pip install 'mnemo-sea[server]'" in missing.message
    assert extra_missing(ModuleNotFoundError("x", name="qdrant_edge.sub"), "x").extra == "embedded"  # type: ignore[union-attr]
    # A module no extra provides is a broken install, not a choice: it is not renamed.
    assert extra_missing(ModuleNotFoundError("x", name="six"), "x") is None


# Runs in a process where `hidden` cannot be imported, as when it is not installed.
HIDDEN = "import sys\nfor name in {hidden!r}: sys.modules[name] = None\n"


def test_the_library_names_the_extra_mnemo_needs() -> None:
    code = HIDDEN.format(hidden=["tiktoken"]) + (
        "import mnemo_sea\n"
        "try:\n    mnemo_sea.Mnemo\nexcept mnemo_sea.ExtraMissing as e:\n    print(e.extra, e.message)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.startswith("embedded mnemo_sea.Mnemo needs the 'embedded' extra"), proc.stdout


@pytest.mark.parametrize(
    ("args", "hidden", "says"),
    [
        (["serve", "--data-dir", "{tmp}"], ["uvicorn"], "`mnemo-sea serve` needs the 'server' extra"),
        (["init", "--data-dir", "{tmp}"], ["tiktoken"], "`mnemo-sea init` needs the 'embedded' extra"),
    ],
)
def test_the_command_line_names_the_extra_a_command_needs(
    args: list[str], hidden: list[str], says: str, tmp_path: Path
) -> None:
    code = (
        HIDDEN.format(hidden=hidden)
        + "sys.argv[0] = 'mnemo-sea'\nfrom mnemo_sea.cli.app import main\nmain()\n"
    )
    argv = [a.format(tmp=tmp_path / "data") for a in args]
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: {says}") and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())


# ---- the wheel, installed slim, against a live server ---------------------------------------

CLIENT_PROBE = r"""
import asyncio, json, sys
from importlib import metadata
from mnemo_sea import EvidenceInput
from mnemo_sea.client import AsyncMnemoClient, MnemoClient
from mnemo_sea.integrations.langchain import MnemoRetriever
url, key = sys.argv[1], sys.argv[2]
out = {}
with MnemoClient(url, api_key=key) as client:
    client.ingest([EvidenceInput(body="Order 1042 shipped from the Leeds depot on Monday.", source="orders",
                                 evidence_id="order:1042")])
    out["search"] = [h.evidence_id for h in client.search("Leeds depot").hits]
    result = client.record("s1", "shell", "line one\nline two\n")
    client.archive_results("s1", [(result.result_id, "two lines of shell output")])
    looked, content = client.get_result("s1", result.result_id, with_content=True)
    out["looked"] = [looked.state, content.decode()]
    out["recovered"] = client.recover("s1", result.result_id).content.decode()
    docs = MnemoRetriever(searcher=client).invoke("Leeds")
    out["retriever"] = [d.metadata.get("evidence_id") for d in docs]
async def asearch():
    async with AsyncMnemoClient(url, api_key=key) as client:
        return [h.evidence_id for h in (await client.search("shipped Monday")).hits]
out["async"] = asyncio.run(asearch())
try:
    from mnemo_sea import Mnemo
except ImportError as e:
    out["mnemo"] = type(e).__name__
out["modules"] = sorted({m.split(".")[0] for m in sys.modules})
out["installed"] = sorted(d.metadata["Name"].lower() for d in metadata.distributions())
out["file"] = __import__("mnemo_sea").__file__
print(json.dumps(out))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def slim_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the built wheel with the slim set and the LangChain extra, as pip
    resolves them from the package index (pip's cache makes a rerun quick)."""
    root = tmp_path_factory.mktemp("slim")
    wheel = build_wheel(root)
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--disable-pip-version-check",
         "--no-compile", "--quiet", f"{wheel}[langchain]"], cwd=root, timeout=600)  # fmt: skip
    return python


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """`mnemo-sea serve` of the development install on a new data folder, and an agent's API key."""
    data = tmp_path_factory.mktemp("served") / "data"
    cli = str(BIN / "mnemo-sea")
    run([cli, "init", "--data-dir", str(data), "--embedder", "hashing"], cwd=data.parent)
    created = run([cli, "keys", "create", "--data-dir", str(data), "--tenant", "t", "--subject", "agent",
                   "--role", "agent", "--json"], cwd=data.parent)  # fmt: skip
    key = json.loads(created.stdout)["api_key"]
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [cli, "serve", "--data-dir", str(data), "--port", str(port), "--embedder", "hashing"],
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180  # a cold start on a loaded machine; only bounds a hang
        while True:
            assert server.poll() is None, f"serve exited: {server.stderr.read() if server.stderr else ''}"
            try:
                if httpx.get(f"{url}/v1/health/live", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "serve did not answer"
            time.sleep(0.2)
        yield url, key
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)


def test_the_wheel_installed_slim_runs_the_client_and_a_retriever_against_a_live_server(
    slim_python: Path, live_server: tuple[str, str], tmp_path: Path
) -> None:
    url, key = live_server
    probe = run([str(slim_python), "-c", CLIENT_PROBE, url, key], cwd=tmp_path)
    report = json.loads(probe.stdout.splitlines()[-1])
    assert Path(report["file"]).resolve().is_relative_to(slim_python.parent.parent.resolve())
    installed = {canonicalize_name(n) for n in report["installed"]}
    assert installed & HEAVY == set(), sorted(installed & HEAVY)
    assert {"sqlalchemy", "numpy", "torch", "qdrant_edge", "fastapi"} & set(report["modules"]) == {
        "sqlalchemy"
    }
    # Searched before anything else was stored, then (async, retriever) beside the session's result.
    assert report["search"] == ["order:1042"]
    assert report["async"][0] == report["retriever"][0] == "order:1042"
    assert report["looked"] == ["archived", "line one\nline two\n"]
    assert report["recovered"] == "line one\nline two\n"
    assert report["mnemo"] == "ExtraMissing"
