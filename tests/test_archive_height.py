"""The archive stands at most 8 floors high, drawn from its own imports.

A module stands one floor above the highest module of the archive it imports (a module that
imports none of them stands on floor 1). The layers contract in pyproject.toml keeps the floors in
order (rules < storage < features < the cross-feature operations < api); this keeps them few,
so a newcomer reads the archive top-down in a handful of steps and a feature never grows on
another's shoulders.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ARCHIVE = Path(__file__).resolve().parent.parent / "archive"
MAX_HEIGHT = 8


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in ARCHIVE.rglob("*.py"):
        parts = list(path.relative_to(ARCHIVE).with_suffix("").parts)
        if "migrations" in parts:
            continue  # run by alembic, imported by nothing
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The archive modules `name` imports (imports inside the archive are relative)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    package = [p for p in package if p]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        base = package[: len(package) - (node.level - 1)]
        module = ".".join([*base, *([node.module] if node.module else [])])
        for candidate in (module, *(f"{module}.{a.name}".lstrip(".") for a in node.names)):
            if candidate in modules and candidate != name:
                out.add(candidate)
    return out


def heights() -> dict[str, int]:
    modules = _modules()
    deps = {name: _imports(name, path, modules) for name, path in modules.items()}

    @functools.cache
    def height(name: str) -> int:
        return 1 + max((height(d) for d in deps[name] if d), default=0)

    return {name or "__init__": height(name) for name in modules}


def test_the_archive_is_at_most_eight_floors_high() -> None:
    found = heights()
    assert found["api"] < found["__init__"]  # the walk sees the relative imports
    features = [h for n, h in found.items() if n.startswith("features.")]
    assert len(features) == 6 and max(features) < found["api"]
    assert max(found.values()) <= MAX_HEIGHT, sorted(found.items(), key=lambda kv: -kv[1])[:5]
