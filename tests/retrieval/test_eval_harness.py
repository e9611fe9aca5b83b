"""The evaluation and benchmark harnesses: metrics as BEIR computes them, commands that run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mnemo_sea.eval.beir import DatasetError, load_beir
from mnemo_sea.eval.bench_search import run as bench_search
from mnemo_sea.eval.metrics import evaluate, mean_overlap, overlap_at
from mnemo_sea.eval.retrieval import run_evaluation
from mnemo_sea.retrieval import InvalidQuery, SearchMode

REPO = Path(__file__).resolve().parents[2]


def write_beir(folder: Path) -> Path:
    docs = [
        ("d1", "Refund policy", "Refunds are paid within 30 days."),
        ("d2", "Carrier delays", "The carrier delayed order O-1042."),
        ("d3", "Cafeteria", "The menu changes every Monday."),
        ("d4", "Damaged goods", "Refunds for damaged goods need a photo."),
    ]
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in docs), encoding="utf-8"
    )
    queries = [("q1", "how fast are refunds paid"), ("q2", "O-1042 delayed"), ("q3", "unjudged query")]
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries), encoding="utf-8"
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td4\t1\nq2\td2\t1\n", encoding="utf-8"
    )
    return folder


def test_ndcg_uses_linear_gains_like_beir() -> None:
    qrels = {"q": {"a": 2, "b": 1}}
    # Ranking b then a: DCG = 1/log2(2) + 2/log2(3); ideal = 2/log2(2) + 1/log2(3).
    expected = (1 + 2 / 1.5849625) / (2 + 1 / 1.5849625)
    assert evaluate(qrels, {"q": ["b", "a"]})["ndcg@10"] == pytest.approx(expected, abs=1e-4)
    assert evaluate(qrels, {"q": ["a", "b"]})["ndcg@10"] == 1.0
    assert evaluate(qrels, {})["ndcg@10"] == 0.0  # a query the run leaves empty still counts


def test_overlap_compares_what_both_lists_hold() -> None:
    assert overlap_at(["a", "b", "c"], ["c", "b", "a"]) == 1.0
    assert overlap_at(["a", "b"], ["a", "x", "y", "z"]) == 0.25
    assert overlap_at([], []) == 1.0
    assert mean_overlap({"q1": ["a"], "q2": ["b"]}, {"q1": ["a"], "q2": ["c"]}) == 0.5


def test_loader_reads_beir_and_keeps_judged_queries_only(tmp_path: Path) -> None:
    data = load_beir(write_beir(tmp_path / "tiny"), "test")
    assert data.doc_ids == ("d1", "d2", "d3", "d4")
    assert data.doc_texts[0] == "Refund policy Refunds are paid within 30 days."
    assert set(data.queries) == {"q1", "q2"}
    with pytest.raises(DatasetError, match=r"dev\.tsv"):
        load_beir(tmp_path / "tiny", "dev")


def test_harness_reports_every_mode_and_the_reference(tmp_path: Path, embedder_factory: type) -> None:
    data = load_beir(write_beir(tmp_path / "tiny"), "test")
    report = run_evaluation(data, embedder=embedder_factory(), show_progress=False)
    assert set(report["results"]) == {"bm25", "dense", "hybrid", "rank_bm25"}
    assert report["results"]["bm25"]["ndcg@10"] > 0.8  # lexical queries on a lexical toy corpus
    # On 4 documents the two IDFs differ (rank_bm25 floors terms in half the corpus); the real
    # comparison is test_bm25_scifact.py.
    assert 0.5 <= report["bm25_overlap@10_vs_rank_bm25"] <= 1.0
    assert report["ingest"]["chunks"] == 4


def test_python_dash_m_entry_point_prints_json(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "tiny")
    done = subprocess.run(
        [sys.executable, "-m", "mnemo_sea.eval.retrieval", "--dataset", str(folder), "--json", "--quiet"],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["queries"] == 2 and report["results"]["hybrid"]["ndcg@10"] > 0.5


def test_cli_commands_are_registered_and_report_bad_input_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from mnemo_sea.cli.app import app

    runner = CliRunner()
    for group, command in (("eval", "retrieval"), ("bench", "search"), ("bench", "ingest")):
        shown = runner.invoke(app, [group, command, "--help"])
        assert shown.exit_code == 0 and "--json" in shown.output
    missing = runner.invoke(app, ["eval", "retrieval", "--dataset", str(tmp_path / "nope")])
    assert missing.exit_code == 2
    assert "error:" in missing.output and "corpus.jsonl is missing" in missing.output
    assert missing.exception is None or isinstance(missing.exception, SystemExit)


def test_bench_search_compares_with_the_post_filter_recipe_on_the_same_data() -> None:
    report = bench_search(3_000, tenants=20, queries=20, warmup=2, alternative=True, embed_queries=False)
    assert report["ours"]["hits_from_other_tenants"] == 0
    assert report["ours"]["queries_with_fewer_than_10_hits"] == 0
    assert report["ours"]["latency"]["runs"] == 20
    assert report["alternative"]["fetch_k"] == 200
    assert report["speedup_p50"] > 0
    assert SearchMode.HYBRID.value == "hybrid"


def test_bench_ingest_reingests_without_embedding() -> None:
    from mnemo_sea.eval.bench_ingest import run as bench_ingest

    report = bench_ingest(24)
    assert report["chunks"] == report["ours"]["written"] >= 24
    assert report["reingest_same_index"]["unchanged"] == report["chunks"]
    assert report["reingest_same_index"]["speedup"] > 1
    assert set(report["meets"]) == {"overhead_max", "reingest_speedup_min"}


def test_a_floor_is_reported_against_the_same_run_without_it(tmp_path: Path, embedder_factory: type) -> None:
    data = load_beir(write_beir(tmp_path / "tiny"), "test")
    report = run_evaluation(
        data,
        embedder=embedder_factory(),
        modes=[SearchMode.HYBRID],
        reference=False,
        show_progress=False,
        min_score=1.0,
    )
    effect = report["floor"]["hybrid"]
    assert effect["min_score"] == 1.0
    assert effect["ndcg@10_without"] == report["results"]["hybrid"]["ndcg@10"]
    # q2 (one relevant document) has irrelevant hits; only chunks holding every term stay at 1.0.
    assert effect["irrelevant_hits_without"] > effect["irrelevant_hits"]
    assert effect["irrelevant_dropped"] == round(
        1 - effect["irrelevant_hits"] / effect["irrelevant_hits_without"], 4
    )
    with pytest.raises(InvalidQuery, match="min_score"):
        run_evaluation(data, embedder=embedder_factory(), min_score=2.0, show_progress=False)
