"""`bench ingest --embedder onnx` at a tiny size: its report's shape, and that the engine and
Mnemo embedded exactly the chunks the model was timed on (the work was done, not how fast)."""

from __future__ import annotations

from mnemo_sea.eval.bench_onnx_ingest import run


def test_the_report_gives_the_model_rate_and_both_ratios() -> None:
    report = run(6, rounds=1, batch_size=4)  # two Mnemo.ingest calls
    assert report["documents"] == 6 and report["chunks"] >= 6
    assert report["embedder"]["model_id"]
    assert report["model_per_call"]["calls"] == 2  # the model makes Mnemo's calls too
    for side, bound in (("engine", "model"), ("mnemo", "model_per_call")):
        assert report[side]["chunks_per_s"] > 0
        # The model ran inside our side: its embedding cache was empty.
        assert 0 < report[side]["model_seconds_inside"][0] <= report[side]["seconds"][0]
        # Each side against the model making the same calls.
        rate = report[side]["chunks_per_s"] / report[bound]["chunks_per_s"]
        assert abs(report[f"ratio_{side}"] - rate) < 0.01
    one_call = report["mnemo"]["chunks_per_s"] / report["model"]["chunks_per_s"]
    assert abs(report["ratio_mnemo_vs_one_call"] - one_call) < 0.01
    assert report["meets_target"] == (min(report["ratio_engine"], report["ratio_mnemo"]) >= 0.9)
