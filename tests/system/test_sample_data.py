"""The sample data that ships inside the package is what `mnemo-sea demo` runs on.

What the demo relies on: every sample document is a valid evidence record, the versioned policy
yields two versions, the citations file gives one `ok` and one broken verdict, the session
script records into a real archive with the policy classes the archive protects (vet approval,
prescription basis, user-confirmed facts) and the ones it flags as stale (stock, price), the
long logs are long and deterministic, and every file is read through importlib.resources from
the package (so it is in the wheel).
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import re
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import pytest

from mnemo_sea.archive import (
    Archive,
    BatchRejected,
    InvalidInput,
    NotFound,
    Principal,
    Role,
    Sensitivity,
)
from mnemo_sea.archive.rules.policy import DEFAULT_POLICY
from mnemo_sea.demo.samples import (
    SAMPLE_TENANTS,
    expected_verdicts,
    load_sample_citations,
    load_sample_tenant,
    load_session_script,
)
from mnemo_sea.demo.session_script import parse_session_script
from mnemo_sea.demo.tool_outputs import lab_analyzer_log, logistics_log
from mnemo_sea.system.citations import check_answers

REPO = Path(__file__).resolve().parents[2]
SAMPLE_DIR = REPO / "mnemo_sea" / "demo" / "sample_data"

CLINIC_IDS = {
    "drug:amoxicillin:label:2026-03",
    "drug:meloxicam:label:2026-05",
    "drug:ivermectin:label:2026-01",
    "drug:carprofen:label:2026-02",
    "drug:praziquantel:label:2026-02",
    "policy:prescription:approval:2026-01",
    "policy:assistant:boundaries:2026-01",
    "policy:visiting-hours:2026-09",
    "policy:vaccination:dog:2026-01",
    "policy:vaccination:cat:2026-01",
    "policy:analgesia:cats",
    "policy:controlled-drugs:2026-01",
    "guide:cats-and-painkillers:en:2026-06",
    "policy:surgery:fasting:2026-02",
    "guide:toxins:2026-02",
    "policy:client-messaging:en:2026-04",
}
SHOP_IDS = {
    "order:O-1042",
    "policy:delivery:domestic:2026-10",
    "policy:delivery:cross-border:2026-10",
    "policy:returns:2026-10",
    "product:K-220:page",
    "promo:singles-day:2026-11",
    "guide:investigation-playbook:2026-10",
}
VERSIONED = "policy:analgesia:cats"
HAN = re.compile("[\u4e00-\u9fff]")


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[Archive]:
    a = Archive.open(f"sqlite+pysqlite:///{tmp_path / 'sample.db'}")
    try:
        yield a
    finally:
        a.close()


def principal(tenant: str, subject: str = "demo-agent") -> Principal:
    return Principal(tenant, subject, frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)


def ingest(archive: Archive, tenant: str) -> Principal:
    who = principal(tenant)
    for item in load_sample_tenant(tenant):
        archive.put_evidence(who, item)
    return who


# ---- documents --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("tenant", "ids"), [("clinic", CLINIC_IDS), ("shop", SHOP_IDS)])
def test_every_sample_document_is_stored_by_the_archive(archive: Archive, tenant: str, ids: set[str]) -> None:
    items = load_sample_tenant(tenant)
    assert {i.evidence_id for i in items} == ids
    who = ingest(archive, tenant)
    for item in items:
        assert item.evidence_id is not None
        rec, content = archive.get_evidence(who, item.evidence_id, with_content=True)
        assert rec.status == "active"
        versions = Counter(i.evidence_id for i in items)[item.evidence_id]
        assert rec.version == versions
        if versions == 1:
            assert content == item.body.encode() if isinstance(item.body, str) else item.body
            assert (rec.source, rec.scope, rec.locator, rec.statement) == (
                item.source,
                item.scope,
                item.locator,
                item.statement,
            )


def test_the_two_sample_tenants_never_see_each_other(archive: Archive) -> None:
    clinic, shop = ingest(archive, "clinic"), ingest(archive, "shop")
    with pytest.raises(NotFound):
        archive.get_evidence(clinic, "order:O-1042")
    with pytest.raises(NotFound):
        archive.get_evidence(shop, "drug:ivermectin:label:2026-01")


def test_the_versioned_policy_yields_two_versions(archive: Archive) -> None:
    v1_item, v2_item = [i for i in load_sample_tenant("clinic") if i.evidence_id == VERSIONED]
    who = ingest(archive, "clinic")

    v1, v2 = archive.evidence_history(who, VERSIONED)
    assert (v1.version, v1.status, v2.version, v2.status) == (1, "superseded", 2, "active")
    assert v1.content_sha256 != v2.content_sha256
    assert v1.valid_until is not None and v1.valid_until == v2.valid_from
    _, old = archive.get_evidence(who, VERSIONED, version=1, with_content=True)
    _, new = archive.get_evidence(who, VERSIONED, with_content=True)
    assert old == str(v1_item.body).encode() and new == str(v2_item.body).encode()
    assert "最多 4 日" in old.decode() and "不再为猫开具术后口服美洛昔康" in new.decode()


def test_every_document_is_complete_and_its_statement_agrees_with_its_body() -> None:
    items = [i for t in SAMPLE_TENANTS for i in load_sample_tenant(t)]
    for item in items:
        assert isinstance(item.body, str)
        assert item.statement and item.locator and item.source and item.scope != "default", item.evidence_id
        assert item.valid_from is not None or item.evidence_id == "order:O-1042", item.evidence_id
        # Every number a statement claims (doses, days, prices) is in the document it summarises.
        body_numbers = set(re.findall(r"\d+(?:\.\d+)?", item.body))
        missing = set(re.findall(r"\d+(?:\.\d+)?", item.statement)) - body_numbers
        assert not missing, f"{item.evidence_id}: statement numbers {missing} are not in the body"
    clinic = load_sample_tenant("clinic")
    english = [i for i in clinic if not HAN.search(str(i.body))]
    assert 12 <= len({i.evidence_id for i in clinic}) <= 20
    assert 2 <= len(english) < len(clinic) / 2  # Chinese, with a few English documents
    assert {i.scope for i in clinic} >= {"drug_label", "policy"}
    assert any(i.sensitivity == Sensitivity.CONFIDENTIAL for i in clinic)


def test_delivery_policies_separate_domestic_from_cross_border() -> None:
    shop = {i.evidence_id: i for i in load_sample_tenant("shop")}
    domestic = shop["policy:delivery:domestic:2026-10"]
    cross = shop["policy:delivery:cross-border:2026-10"]
    assert (domestic.scope, cross.scope) == ("domestic", "cross-border")
    assert "2–4 个工作日" in str(domestic.body) and "7-15 business days" in str(cross.body)
    assert (
        'ship_scope": "cross-border' in load_session_script().tenant("shop").sessions[0].call("order").content
    )
    promo = shop["promo:singles-day:2026-11"]
    assert promo.valid_until is not None and promo.valid_until < datetime(2026, 11, 29, tzinfo=UTC)


# ---- citations --------------------------------------------------------------------------------------


def test_the_sample_citations_give_one_ok_and_one_broken(archive: Archive) -> None:
    who = ingest(archive, "clinic")
    answers = load_sample_citations("clinic")
    result = check_answers(archive, who, answers)

    verdicts = [[c.verdict for c in r.checks] for r in result.reports]
    assert verdicts == expected_verdicts("clinic") == [["ok", "quote_not_found"]]
    good, broken = result.reports[0].checks
    assert good.quote_found and good.locator_matches
    assert broken.resolves and not broken.quote_found
    assert result.precision == 0.5


def test_unknown_sample_names_are_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="clinic, shop"):
        load_sample_tenant("hospital")
    with pytest.raises(InvalidInput):
        load_sample_citations("shop")


# ---- the session script -----------------------------------------------------------------------------


def test_the_script_has_what_the_demo_walks_through() -> None:
    script = load_session_script()
    assert [t.tenant for t in script.tenants] == ["clinic", "shop"]
    classes = {t.tenant: {c.policy_class for s in t.sessions for c in s.calls} for t in script.tenants}
    assert classes["clinic"] >= {"stock", "vet_approval", "prescription_basis", "user_confirmed_fact"}
    assert classes["shop"] >= {"stock", "price", "user_confirmed_fact"}
    for tenant in script.tenants:
        for session in tenant.sessions:
            for call in session.calls:
                assert call.observed_at.utcoffset() is not None
                # Only what policy allows to be set aside carries the note for it, except the
                # vet approval, whose note the demo uses to show the refusal.
                if call.archive_note is None:
                    assert DEFAULT_POLICY.is_protected(call.policy_class), call.label
        facts = [(f.owner, f.key, f.provenance) for f in tenant.memory]
        assert [p for *_, p in facts] == ["user_claim", "user_correction"]
        assert len({(o, k) for o, k, _ in facts}) == 1  # the correction supersedes the claim

    log = script.tenant("shop").session("investigate-O-1042").call("tracking_log").content
    lines = log.splitlines()
    assert len(lines) == 300
    assert "timed out" in lines[-1] and "UNKNOWN" in lines[-1]
    assert sum("read timeout" in line for line in lines) == 3
    assert any("ignore your previous instructions" in line for line in lines)  # data, not instructions
    lab = script.tenant("clinic").sessions[0].call("lab_log").content
    assert len(lab.splitlines()) == 240 and "3 of 20 fields" in lab


def test_generated_logs_are_deterministic_and_sized() -> None:
    assert (
        hashlib.sha256(logistics_log().encode()).digest() == hashlib.sha256(logistics_log().encode()).digest()
    )
    assert lab_analyzer_log() == lab_analyzer_log()
    assert len(logistics_log(lines=500).splitlines()) == 500
    assert len(lab_analyzer_log(lines=60).splitlines()) == 60
    with pytest.raises(InvalidInput, match="lines"):
        logistics_log(lines=5)
    with pytest.raises(InvalidInput, match="order_id"):
        logistics_log(order_id="O 1042")


def test_the_script_records_into_an_archive_and_obeys_its_policy(archive: Archive) -> None:
    for tenant in load_session_script().tenants:
        who = principal(tenant.tenant, tenant.agent)
        for session in tenant.sessions:
            ids = {}
            for call in session.calls:
                result = archive.record(
                    who,
                    session.session_id,
                    call.tool,
                    call.content,
                    arguments=call.arguments,
                    media_type=call.media_type,
                    observed_at=call.observed_at,
                    sensitivity=call.sensitivity,
                    policy_class=call.policy_class,
                    owner=session.owner,
                )
                assert result.content_sha256 == hashlib.sha256(call.content.encode()).hexdigest()
                ids[call.label] = result.result_id
            assert list(ids.values()) == [f"r{n}" for n in range(1, len(session.calls) + 1)]

            protected = [c for c in session.calls if DEFAULT_POLICY.is_protected(c.policy_class)]
            for call in protected:
                with pytest.raises(BatchRejected) as err:
                    archive.archive_results(
                        who, session.session_id, [(ids[call.label], call.archive_note or "x")]
                    )
                assert err.value.targets[0].status == "protected"

            notes = [
                (ids[c.label], c.archive_note)
                for c in session.calls
                if c.archive_note and not DEFAULT_POLICY.is_protected(c.policy_class)
            ]
            receipt = archive.archive_results(who, session.session_id, notes)
            assert len(receipt.archived) == len(notes) >= 3
            view = archive.live_view(who, session.session_id)
            for call in protected:
                assert call.content.splitlines()[0] in view.text  # stays live, verbatim

            for call in session.calls:
                if DEFAULT_POLICY.is_time_sensitive(call.policy_class):
                    back = archive.recover(who, session.session_id, ids[call.label])
                    assert back.content == call.content.encode()
                    assert back.staleness_warning is not None

        for fact in tenant.memory:
            archive.remember(who, fact.owner, fact.key, fact.value, fact.provenance)
        last = tenant.memory[-1]
        current = archive.current(who, last.owner, last.key)
        assert current is not None and current.value == last.value
        assert len(archive.memory_history(who, last.owner, last.key)) == 2


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda s: s.replace('"generator": "logistics_log"', '"generator": "nope"'), "content.generator"),
        (lambda s: s.replace('"2026-11-28T09:00:00+08:00"', '"2026-11-28T09:00:00"'), "observed_at"),
        (lambda s: s.replace('"policy_class": "price"', '"policy_class": "Price!"'), "policy_class"),
        (lambda s: s.replace('"lines": 300', '"lines": 300, "colour": "red"'), "bad generator arguments"),
        (lambda s: s.replace("mnemo-sea/session-script/1", "v0"), "format"),
    ],
)
def test_a_malformed_script_names_the_place(mutate: Callable[[str], str], where: str) -> None:
    text = (SAMPLE_DIR / "sessions.json").read_text(encoding="utf-8")
    changed = mutate(text)
    assert changed != text
    with pytest.raises(InvalidInput) as err:
        parse_session_script(changed.encode())
    assert where in err.value.message


# ---- packaging --------------------------------------------------------------------------------------


def test_every_sample_file_is_package_data_and_read_from_the_package() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["*"]
    files = [p for p in SAMPLE_DIR.iterdir() if p.is_file() and p.suffix != ".pyc"]
    assert {p.name for p in files} >= {
        "clinic.jsonl",
        "shop.jsonl",
        "sessions.json",
        "clinic_citations.jsonl",
    }
    for path in files:
        if path.suffix == ".py":
            continue
        assert any(fnmatch.fnmatch(path.name, pat) for pat in patterns), f"{path.name} would miss the wheel"
        packaged = resources.files("mnemo_sea.demo.sample_data").joinpath(path.name)
        assert packaged.read_bytes() == path.read_bytes()
    assert not [p for p in SAMPLE_DIR.iterdir() if p.is_dir() and p.name != "__pycache__"], (
        "package-data patterns do not reach subfolders"
    )
    assert sum(p.stat().st_size for p in files) < 200_000


def test_the_sample_data_package_holds_data_and_no_code() -> None:
    # The loaders, the script parser and the log generators are modules of mnemo_sea.demo;
    # the data package's __init__ exists only so that importlib.resources finds the files.
    tree = ast.parse((SAMPLE_DIR / "__init__.py").read_text(encoding="utf-8"))
    assert ast.get_docstring(tree) and len(tree.body) == 1, "sample_data/__init__.py holds code"
    assert not [p.name for p in SAMPLE_DIR.glob("*.py") if p.name != "__init__.py"]
