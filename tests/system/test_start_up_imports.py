"""What a process imports to start: the command line, and an embedded system searching English,
load neither Redis's client, nor Chinese segmentation, nor the REST models. Each is a tenth to a
quarter of the command line's start-up, paid by every command a user or script runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROBE = """
import json, sys
from pathlib import Path

def loaded():
    return sorted(m for m in ("redis", "rjieba", "mnemo_sea.rest.models") if m in sys.modules)

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


def test_the_command_line_and_an_embedded_search_import_only_what_they_use(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["cli"] == []
    assert seen["english"] == []
    assert seen["hits"][0] == ["d:1"]
    # Chinese text loads the segmenter when it is first met, and finds what it indexed.
    assert seen["chinese"] == ["rjieba"]
    assert "d:2" in seen["hits"][1]
