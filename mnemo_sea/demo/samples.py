"""The packaged sample data, loaded: the two tenants' documents, the cited answers, the script.

The files live in `mnemo_sea.demo.sample_data` (its docstring describes each) and are read
through importlib.resources, so they load from an installed wheel as from the repository.
"""

from __future__ import annotations

import json
from importlib import resources

from mnemo_sea.archive import EvidenceInput, InvalidInput
from mnemo_sea.demo import sample_data
from mnemo_sea.demo.session_script import SessionScript, parse_session_script
from mnemo_sea.system.citations import CitedAnswer, load_citations_jsonl
from mnemo_sea.system.documents import MalformedDocuments, parse_jsonl

SAMPLE_TENANTS = ("clinic", "shop")
CITATION_TENANTS = ("clinic",)
_SHOWN = "mnemo_sea/demo/sample_data"  # how a packaging problem names the file


def _resource(name: str) -> bytes:
    return resources.files(sample_data).joinpath(name).read_bytes()


def _check_tenant(name: object, known: tuple[str, ...]) -> str:
    if not isinstance(name, str) or name not in known:
        raise InvalidInput("tenant", f"{name!r} is not a sample tenant; choose one of {', '.join(known)}")
    return name


def load_sample_tenant(name: str) -> list[EvidenceInput]:
    """The evidence documents of sample tenant `name` ("clinic" or "shop"), in store order."""
    file = f"{_check_tenant(name, SAMPLE_TENANTS)}.jsonl"
    documents, problems = parse_jsonl(_resource(file), f"{_SHOWN}/{file}", file)
    if problems:  # a packaging bug, not a user mistake; still a typed error naming each line
        raise MalformedDocuments(problems, documents)
    return [d.item for d in documents]


def load_sample_citations(name: str = "clinic") -> list[CitedAnswer]:
    """The sample answers with citations of tenant `name` (only "clinic" has some)."""
    file = resources.files(sample_data).joinpath(f"{_check_tenant(name, CITATION_TENANTS)}_citations.jsonl")
    with resources.as_file(file) as path:
        return load_citations_jsonl(path)


def expected_verdicts(name: str = "clinic") -> list[list[str]]:
    """For each sample answer of `name`, the verdict each of its citations should get."""
    file = f"{_check_tenant(name, CITATION_TENANTS)}_citations.jsonl"
    lines = _resource(file).decode("utf-8").splitlines()
    return [list(json.loads(line)["expected"]) for line in lines if line.strip()]


def load_session_script() -> SessionScript:
    """The demo's session script, shipped as `sessions.json`, with generated contents built."""
    return parse_session_script(_resource("sessions.json"), f"{_SHOWN}/sessions.json")
