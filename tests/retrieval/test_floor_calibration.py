"""`mnemo-sea eval floor`: a relevance floor chosen on other queries than those it is judged on.

The SciFact figure itself (floor chosen on the training claims, judged on the test split) comes
from the command on the whole corpus (eval/README.md); here, the procedure on a tiny dataset.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path

import pytest
from test_eval_harness import write_beir
from typer.testing import CliRunner

from mnemo_sea.cli.app import app
from mnemo_sea.eval.beir import DatasetError, load_beir
from mnemo_sea.eval.floor_calibration import (
    calibration_set,
    choose_floor,
    load_calibration_qrels,
    run_floor_calibration,
)


def effect(loss: float, dropped: float) -> dict[str, float]:
    return {"ndcg@10_without": 0.7, "ndcg@10": 0.7 - loss, "irrelevant_dropped": dropped}


def test_the_middle_of_the_floors_meeting_both_targets_is_chosen() -> None:
    sweep = {
        0.4: effect(0.0, 0.30),  # leaves too much in
        0.5: effect(0.001, 0.50),  # meets both (the bounds count)
        0.6: effect(0.005, 0.62),
        0.7: effect(0.004, 0.70),
        0.8: effect(0.02, 0.90),  # costs too much
    }
    assert choose_floor(sweep, 0.005, 0.5) == 0.6
    assert choose_floor({0.5: sweep[0.5], 0.7: sweep[0.7]}, 0.005, 0.5) == 0.5  # the lower middle
    assert choose_floor({0.4: sweep[0.4], 0.8: sweep[0.8]}, 0.005, 0.5) is None


def _claims_csv() -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        ["id", "claim", "evidence_doc_id", "evidence_label", "evidence_sentences", "cited_doc_ids"]
    )
    writer.writerow(["q3", "unjudged query", "d3", "SUPPORT", "[0]", "[d3]"])
    writer.writerow(["q3", "unjudged query", "d2", "SUPPORT", "[1]", "[d2]"])
    writer.writerow(["q9", "a claim with no evidence", "", "", "[]", "[d1]"])
    return out.getvalue()


def test_calibration_judgments_come_from_a_qrels_file_or_scifacts_claims(tmp_path: Path) -> None:
    expected = {"q3": {"d3": 1, "d2": 1}}  # a claim without evidence judges nothing
    (tmp_path / "claims_train.csv").write_text(_claims_csv(), encoding="utf-8")
    assert load_calibration_qrels(tmp_path / "claims_train.csv") == expected
    with zipfile.ZipFile(tmp_path / "scifact.zip", "w") as z:
        z.writestr("claims_train.csv", _claims_csv())
        z.writestr("claims_test.csv", "id,claim\n")
    assert load_calibration_qrels(tmp_path / "scifact.zip") == expected
    (tmp_path / "cal.tsv").write_text("query-id\tcorpus-id\tscore\nq3\td3\t1\n", encoding="utf-8")
    assert load_calibration_qrels(tmp_path / "cal.tsv") == {"q3": {"d3": 1}}
    bad = {
        "other.csv": b"a,b\n1,2\n",
        "cal.json": b"{}",
        "short.tsv": b"q1\td1\n",
        "score.tsv": b"q1\td1\tx\n",
        "latin.csv": "id,evidence_doc_id\n1,caf\u00e9\n".encode("latin-1"),
        "fake.zip": b"not a zip",
    }
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
    for name in [*bad, "missing.tsv"]:
        with pytest.raises(DatasetError, match=str(tmp_path / name)):
            load_calibration_qrels(tmp_path / name)


def test_the_floor_is_chosen_on_the_calibration_queries_and_judged_once_on_the_split(
    tmp_path: Path, embedder_factory: type
) -> None:
    folder = write_beir(tmp_path / "tiny")
    # A calibration query whose one relevant document holds all its words: a high floor keeps
    # it (an exact lexical match) and leaves the rest out, so some floor meets both targets.
    with (folder / "queries.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"_id": "q4", "text": "menu changes every Monday"}) + "\n")
    (folder / "cal.tsv").write_text("query-id\tcorpus-id\tscore\nq4\td3\t1\n", encoding="utf-8")
    data = load_beir(folder, "test")
    queries, qrels = calibration_set(folder, folder / "cal.tsv")
    assert queries == {"q4": "menu changes every Monday"}
    report = run_floor_calibration(
        data, queries, qrels, embedder=embedder_factory(), floors=(0.0, 0.5, 1.0), show_progress=False
    )
    assert (report["calibration_queries"], report["judged_queries"]) == (1, 2)
    sweep = report["calibration"]["sweep"]
    assert set(sweep) == {"0.0", "0.5", "1.0"}
    passing = report["calibration"]["floors_meeting_targets"]
    assert passing == [f for f in (0.0, 0.5, 1.0) if choose_floor({f: sweep[str(f)]}, 0.005, 0.5) == f]
    assert 1.0 in passing and 0.0 not in passing  # no floor leaves every irrelevant hit in
    chosen = report["calibration"]["chosen_floor"]
    assert chosen == choose_floor({float(f): e for f, e in sweep.items()}, 0.005, 0.5)
    judged = report["judged"]  # the chosen floor, on the test split's q1 and q2
    assert judged["irrelevant_hits"] <= judged["irrelevant_hits_without"]
    assert report["meets"] == (
        round(judged["ndcg@10_without"] - judged["ndcg@10"], 4) <= 0.005
        and judged["irrelevant_dropped"] >= 0.5
    )


def test_a_calibration_query_that_is_judged_too_is_refused(tmp_path: Path, embedder_factory: type) -> None:
    folder = write_beir(tmp_path / "tiny")
    (folder / "cal.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    queries, qrels = calibration_set(folder, folder / "cal.tsv")
    with pytest.raises(DatasetError, match="judged queries too"):
        run_floor_calibration(load_beir(folder, "test"), queries, qrels, embedder=embedder_factory())
    (folder / "cal.tsv").write_text("query-id\tcorpus-id\tscore\nq404\td1\t1\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="no text"):
        calibration_set(folder, folder / "cal.tsv")
    (folder / "cal.tsv").write_text("query-id\tcorpus-id\tscore\nq3\td404\t1\n", encoding="utf-8")
    queries, qrels = calibration_set(folder, folder / "cal.tsv")
    with pytest.raises(DatasetError, match="no calibration query has a judged document"):
        run_floor_calibration(load_beir(folder, "test"), queries, qrels, embedder=embedder_factory())


def test_the_command_reports_bad_calibration_input_in_one_line(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "tiny")
    (folder / "cal.json").write_text("{}", encoding="utf-8")
    result = CliRunner().invoke(
        app, ["eval", "floor", "--dataset", str(folder), "--calibration", str(folder / "cal.json"), "--json"]
    )
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["message"].startswith(str(folder / "cal.json"))
