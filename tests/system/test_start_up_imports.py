"""What a process imports to start.

- The command line, and an embedded system storing and searching English, load neither Chinese
  segmentation nor the REST models, each about a tenth of the command line's start-up or more,
  paid by every command a user or script runs; and they run without the `server` extra's
  modules (Redis's client among them), as `pip install '.[embedded]'` installs them.
- A server (REST or MCP) loads Chinese segmentation as it starts, not while a request waits.

Each probe is a fresh process: this one has imported everything long ago.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import cast

from mnemo_sea.extras import EXTRA_OF_MODULE

SERVER_MODULES = sorted(module for module, extra in EXTRA_OF_MODULE.items() if extra == "server")

EMBEDDED = """
import json, sys
from pathlib import Path

for module in json.loads(sys.argv[2]):
    sys.modules[module] = None  # as if not installed: importing it raises ImportError

def loaded():
    return sorted(m for m in ("rjieba", "mnemo_sea.rest.models") if m in sys.modules)

seen = {}
from mnemo_sea.cli.app import main
seen["cli"] = loaded()

from mnemo_sea.archive import EvidenceInput, Principal, Role
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

admin = Principal("clinic-a", "admin-1", frozenset({Role.ADMIN}))
with Mnemo.open(Path(sys.argv[1]), embedder=HashingEmbedder()) as m:
    m.ingest(admin, [EvidenceInput(body="Carprofen is not for use in cats.", source="kb", evidence_id="d:1")])
    english = [h.evidence_id for h in m.search(admin, "carprofen cats").hits]
    seen["english"] = loaded()
    m.ingest(admin, [EvidenceInput(body="卡洛芬不可用于猫", source="kb", evidence_id="d:2")])
    chinese = [h.evidence_id for h in m.search(admin, "卡洛芬").hits]
    seen["chinese"] = loaded()
seen["hits"] = [english, chinese]
print(json.dumps(seen))
"""

SERVERS = """
import json, sys
from pathlib import Path

from mnemo_sea.archive import Principal, Role
from mnemo_sea.mcp.server import build_server, fixed_principal
from mnemo_sea.rest.app import create_app
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

seen = {"imported": "rjieba" in sys.modules}
admin = Principal("clinic-a", "admin-1", frozenset({Role.ADMIN}))
with Mnemo.open(Path(sys.argv[1]), embedder=HashingEmbedder()) as m:
    create_app(m)
    seen["rest"] = "rjieba" in sys.modules
    del sys.modules["rjieba"]  # so that building the MCP server must load it again
    build_server(m, fixed_principal(admin))
    seen["mcp"] = "rjieba" in sys.modules
print(json.dumps(seen))
"""


def _probe(source: str, *args: str) -> dict[str, object]:
    run = subprocess.run(
        [sys.executable, "-c", source, *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert run.returncode == 0, run.stderr
    found: dict[str, object] = json.loads(run.stdout.strip().splitlines()[-1])
    return found


def test_the_command_line_and_an_embedded_system_import_only_what_they_use(tmp_path: Path) -> None:
    assert "redis" in SERVER_MODULES and "fastapi" in SERVER_MODULES  # the table is read
    seen = _probe(EMBEDDED, str(tmp_path / "data"), json.dumps(SERVER_MODULES))
    assert seen["cli"] == []
    assert seen["english"] == []
    english, chinese = cast("list[list[str]]", seen["hits"])
    assert english == ["d:1"] and "d:2" in chinese
    # Chinese text loads the segmenter when it is first met, and finds what it indexed.
    assert seen["chinese"] == ["rjieba"]


def test_a_server_loads_chinese_segmentation_as_it_starts(tmp_path: Path) -> None:
    seen = _probe(SERVERS, str(tmp_path / "data"))
    assert seen == {"imported": False, "rest": True, "mcp": True}
