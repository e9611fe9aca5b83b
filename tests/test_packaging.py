"""The project ships as one import package, `mnemo_sea`, and both install modes work.

ARCHITECTURE.md ("Layout"): the layers live at the repository root (archive/, retrieval/,
eval/) but must not squat generic top-level names; they ship as mnemo_sea.archive,
mnemo_sea.retrieval and mnemo_sea.eval. Proven here:

- a wheel built from a clean copy of the tree holds only `mnemo_sea/` (plus its dist-info),
  every module of every layer, and the Alembic migrations;
- installed with --no-deps into a fresh venv (which borrows the already-installed
  dependencies through a .pth line, and does *not* see the repository or its editable
  install), the public API imports from that venv's site-packages when run outside the
  repository, `archive`/`retrieval`/`eval` are not importable, and the migrations run;
- the extras `[langchain]` and `[llama-index]` resolve with no index against the framework
  versions the suite runs with, and both retrievers run from the installed wheel;
- the editable install of the development venv imports mnemo_sea.archive from the repository;
- archive/ and retrieval/ never import each other (the import-linter contracts, and an
  AST check that does not depend on that tool).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from wheels import build_sdist, build_wheel, clean_env, run, wheel_of

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("archive", "retrieval", "eval")
BIN = Path(sys.executable).parent

# Runs in the fresh venv, from a directory outside the repository.
PROBE = r"""
import importlib, importlib.util, json, sys, tempfile, os
mods = {}
for name in ("mnemo_sea", "mnemo_sea.archive", "mnemo_sea.retrieval", "mnemo_sea.eval",
             "mnemo_sea.archive.migrations"):
    mods[name] = importlib.import_module(name).__file__
squatted = {name: importlib.util.find_spec(name) is not None for name in ("archive", "retrieval", "eval")}
from mnemo_sea.archive import Archive, Principal, Role, Sensitivity
agent = Principal("t", "agent", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
with tempfile.TemporaryDirectory() as d:
    a = Archive.open(os.path.join(d, "a.db"))  # runs the shipped Alembic migrations
    a.record(agent, "s", "tool", "hello from the wheel")
    a.archive_results(agent, "s", [("r1", "greeting")])
    recovered = a.recover(agent, "s", "r1").content.decode()
    a.close()
print(json.dumps({"modules": mods, "squatted": squatted, "recovered": recovered, "path": sys.path}))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv with only the wheel installed; dependencies borrowed from the dev venv."""
    env_dir = tmp_path_factory.mktemp("venv") / "clean"
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # The dev venv's pip installs into the new interpreter's environment.
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
         "--no-compile", "--disable-pip-version-check", str(wheel)], cwd=env_dir)  # fmt: skip
    site = Path(
        run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=env_dir
        ).stdout.strip()
    )
    # A path line in a .pth adds the dev venv's site-packages *after* the new one; .pth files
    # found there are not processed, so its editable finder for the repository stays out.
    deps = Path(sysconfig.get_path("purelib"))
    (site / "zz_borrowed_dependencies.pth").write_text(f"{deps}\n")
    yield python


def test_wheel_ships_only_mnemo_sea(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD"))
        top_level = zf.read(f"{dist_info}/top_level.txt").decode().split()
    assert top_level == ["mnemo_sea"]
    assert {n.split("/")[0] for n in names} == {"mnemo_sea", dist_info}
    for layer in LAYERS:
        assert f"mnemo_sea/{layer}/__init__.py" in names
        assert f"mnemo_sea/{layer}/py.typed" in names
        assert not any(n.startswith(f"{layer}/") for n in names)


def test_the_sdist_builds_the_same_wheel_as_the_tree(wheel: Path, tmp_path: Path) -> None:
    """`python -m build` makes the sdist, then the wheel from it: the layers' symlinks become
    real folders in the sdist, and nothing is lost on the way."""
    sdist = build_sdist(tmp_path / "s")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
        names = tar.getnames()
    assert "mnemo_sea-0.1.0/mnemo_sea/archive/api.py" in names  # a file, not a link to ../archive
    assert not any(n.startswith("mnemo_sea-0.1.0/archive/") for n in names)
    rebuilt = wheel_of(tmp_path / "unpacked" / "mnemo_sea-0.1.0", tmp_path / "w")
    with zipfile.ZipFile(wheel) as tree, zipfile.ZipFile(rebuilt) as from_sdist:
        assert set(from_sdist.namelist()) == set(tree.namelist())


def test_wheel_holds_every_module_and_the_migrations(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    for layer in LAYERS:
        for path in (REPO / layer).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(REPO).as_posix()
            assert f"mnemo_sea/{rel}" in names, f"{rel} is missing from the wheel"
    migrations = "mnemo_sea/archive/migrations"
    assert f"{migrations}/env.py" in names
    assert f"{migrations}/script.py.mako" in names
    versions = sorted(p.name for p in (REPO / "archive/migrations/versions").glob("*.py"))
    assert [v for v in versions if v != "__init__.py"], "no migration versions found in the repository"
    for v in versions:
        assert f"{migrations}/versions/{v}" in names


def test_installed_wheel_imports_from_its_venv_outside_the_repo(installed: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    proc = run([str(installed), "-c", PROBE], cwd=outside)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    env_root = installed.parent.parent.resolve()
    for name, file in report["modules"].items():
        resolved = Path(file).resolve()
        assert resolved.is_relative_to(env_root / "lib"), (
            f"{name} imported from {file}, not from the new venv"
        )
        assert not resolved.is_relative_to(REPO), f"{name} imported from the repository"
    assert report["squatted"] == {"archive": False, "retrieval": False, "eval": False}
    assert report["recovered"] == "hello from the wheel"
    assert not any(Path(p).resolve() == REPO for p in report["path"] if p)


def test_installed_console_script_runs(installed: Path, tmp_path: Path) -> None:
    script = installed.parent / "mnemo-sea"
    assert script.exists(), "the wheel did not install the mnemo-sea console script"
    proc = run([str(script), "--help"], cwd=tmp_path)
    assert "mnemo-sea" in proc.stdout or "Usage" in proc.stdout


# Runs in the fresh venv, outside the repository: both retrievers over a searcher that answers one hit.
RETRIEVERS_PROBE = r"""
import json
from mnemo_sea.integrations import langchain, llama_index
from mnemo_sea.system.mnemo import SearchHit, SearchResult
class OneHit:
    def search(self, query, /, **filters):
        hit = SearchHit("e1", 1, "knowledge", "kb", "default", "p. 1", "the wheel's text", 0.5, 1, 1, (0, 16))
        return SearchResult(status="results", hits=(hit,))
docs = langchain.MnemoRetriever(searcher=OneHit()).invoke("wheel")
nodes = llama_index.MnemoRetriever(OneHit()).retrieve("wheel")
print(json.dumps({"files": [langchain.__file__, llama_index.__file__],
                  "texts": [docs[0].page_content, nodes[0].node.get_content()]}))
"""


def test_the_extras_resolve_offline_and_their_retrievers_run_from_the_wheel(
    wheel: Path, installed: Path, tmp_path: Path
) -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    with zipfile.ZipFile(wheel) as zf:
        metadata = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    for extra in ("langchain", "llama-index"):
        assert f"Provides-Extra: {extra}" in metadata
        assert any(r.startswith("mnemo-sea[") and extra in r for r in extras["all"]), "all pulls both"
    assert "mnemo-sea[all]" in extras["dev"]
    # `pip install 'mnemo-sea[langchain,llama-index]'` into a fresh venv: with no index, every
    # framework requirement is met by the versions the suite runs with, so pip installs the
    # wheel alone.
    bare = tmp_path / "bare"
    venv.EnvBuilder(with_pip=False).create(bare)
    python = bare / "bin" / "python"
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=bare)
    (Path(site.stdout.strip()) / "zz_borrowed_dependencies.pth").write_text(
        f"{sysconfig.get_path('purelib')}\n"
    )
    proc = run([sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run", "--no-index",
                "--disable-pip-version-check", f"{wheel}[langchain,llama-index]"], cwd=bare)  # fmt: skip
    assert "Requirement already satisfied: langchain-core" in proc.stdout
    assert "Requirement already satisfied: llama-index-core" in proc.stdout
    assert [line for line in proc.stdout.splitlines() if line.startswith("Would install")] == [
        "Would install mnemo-sea-0.1.0"
    ]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    report = json.loads(
        run([str(installed), "-c", RETRIEVERS_PROBE], cwd=outside).stdout.strip().splitlines()[-1]
    )
    env_root = installed.parent.parent.resolve()
    assert all(Path(f).resolve().is_relative_to(env_root / "lib") for f in report["files"]), report["files"]
    assert report["texts"] == ["the wheel's text", "the wheel's text"]


def test_editable_install_imports_from_the_repository(tmp_path: Path) -> None:
    code = (
        "import importlib.util, json, mnemo_sea.archive, mnemo_sea.retrieval, mnemo_sea.eval\n"
        "print(json.dumps({'files': [m.__file__ for m in (mnemo_sea.archive, mnemo_sea.retrieval, "
        "mnemo_sea.eval)], 'squatted': [importlib.util.find_spec(n) is not None "
        "for n in ('archive', 'retrieval', 'eval')]}))"
    )
    proc = run([sys.executable, "-c", code], cwd=tmp_path)  # outside the repo: only the install helps
    report = json.loads(proc.stdout)
    for layer, file in zip(LAYERS, report["files"], strict=True):
        assert Path(file).resolve() == (REPO / layer / "__init__.py").resolve()
    assert report["squatted"] == [False, False, False]


# ---- layering ------------------------------------------------------------------------------


def test_import_linter_contracts_hold() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    independent = [c for c in config["contracts"] if c["type"] == "independence"]
    assert any({"mnemo_sea.archive", "mnemo_sea.retrieval"} <= set(c["modules"]) for c in independent), (
        "the archive/retrieval independence contract is gone from pyproject.toml"
    )
    lint = BIN / "lint-imports"
    proc = subprocess.run(
        [str(lint), "--no-cache"],
        check=False,
        cwd=REPO,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def imported_modules(path: Path, package: str) -> set[str]:
    """Absolute names of every module `path` (a module of `package`) imports, relative ones resolved."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            found.add(prefix)
            found.update(f"{prefix}.{alias.name}" for alias in node.names)
    return found


def layer_imports(layer: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in (REPO / layer).rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(REPO).with_suffix("")
        package = ".".join(["mnemo_sea", *rel.parts[:-1]])  # archive/x.py and archive/__init__.py alike
        out[rel.as_posix()] = imported_modules(path, package)
    return out


def reaches(names: set[str], layer: str) -> set[str]:
    return {
        n
        for n in names
        if n in (layer, f"mnemo_sea.{layer}") or n.startswith((f"{layer}.", f"mnemo_sea.{layer}."))
    }


@pytest.mark.parametrize(("layer", "other"), [("archive", "retrieval"), ("retrieval", "archive")])
def test_layers_never_import_each_other(layer: str, other: str) -> None:
    imports = layer_imports(layer)
    assert imports, f"no modules found in {layer}/"
    offenders = {
        mod: sorted(reaches(names, other)) for mod, names in imports.items() if reaches(names, other)
    }
    assert offenders == {}, f"{layer}/ imports {other}/"
    # Neither layer reaches up into the composition root or the eval harnesses either.
    upward = {
        mod: sorted(
            n
            for n in names
            if n in {"mnemo_sea", "eval"} or n.startswith(("mnemo_sea.cli.app", "mnemo_sea.eval", "eval."))
        )
        for mod, names in imports.items()
    }
    assert {m: n for m, n in upward.items() if n} == {}


def test_the_import_check_catches_a_crossing(tmp_path: Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text("from ..retrieval import bm25\nimport mnemo_sea.retrieval.fields\nfrom . import schema\n")
    names = imported_modules(bad, "mnemo_sea.archive")
    assert reaches(names, "retrieval") == {
        "mnemo_sea.retrieval",
        "mnemo_sea.retrieval.bm25",
        "mnemo_sea.retrieval.fields",
    }
    assert "mnemo_sea.archive.schema" in names
