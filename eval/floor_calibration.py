"""Choose a relevance floor (`min_score`) on one set of judged queries and judge it on another.

A floor is a number a user picks; whether one exists that leaves out most irrelevant hits at no
cost in ranking quality is a question about the data, and a floor picked on the queries it is
judged on says little about the next ones. So `mnemo-sea eval floor`:

1. indexes the corpus once;
2. sweeps the floors `FLOORS` on the *calibration* queries (qrels of other queries than the
   judged split's: a BEIR qrels file, or SciFact's official training claims), measuring for
   each what `eval.metrics.floor_effect` measures against the same run without a floor;
3. keeps the floors that meet both targets there (nDCG@10 falls by at most `max_ndcg_loss`, at
   least `min_dropped` of the irrelevant top-10 hits of single-relevant-document queries are
   left out) and chooses the middle one (the lower of two middles): a floor at the edge of what
   met the targets is the first to miss them on other queries;
4. judges that one floor on the judged split, once, and says whether it meets both targets.

Issue 28 asks for this on SciFact (nDCG@10 loss <= 0.005, half of the irrelevant hits left out);
the calibration set is the SciFact training claims with evidence, which share no query with BEIR's
test split.
"""

from __future__ import annotations

import csv
import io
import statistics
import tempfile
import time
import zipfile
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from mnemo_sea.eval.beir import BeirDataset, DatasetError, load_queries
from mnemo_sea.eval.metrics import floor_effect
from mnemo_sea.eval.retrieval import (
    DEPTH,
    Bars,
    fitted_encoding,
    ingest_dataset,
    rank_queries,
)
from mnemo_sea.retrieval import (
    Embedder,
    EmbeddingCache,
    HybridIndex,
    OnnxEmbedder,
    SearchMode,
    SearchSettings,
)

# Floors swept on the calibration queries: the cosine scale of the packaged model, where related
# texts sit around 0.3-0.7.
FLOORS = tuple(round(0.30 + 0.01 * i, 2) for i in range(41))  # 0.30 ... 0.70
MAX_NDCG_LOSS = 0.005
MIN_DROPPED = 0.5
SCIFACT_TRAIN_CLAIMS = "claims_train.csv"

Qrels = dict[str, dict[str, int]]


def load_calibration_qrels(path: Path) -> Qrels:
    """Judgments of the calibration queries: a BEIR qrels file (`.tsv`: query-id, corpus-id,
    score), or SciFact's claims (a `claims_*.csv`, or the zip holding `claims_train.csv`), whose
    claims with evidence judge their evidence documents relevant, as BEIR built SciFact's qrels.
    DatasetError names the file (and line) of anything else."""
    if not path.is_file():
        raise DatasetError(f"{path} is not a file")
    try:
        if path.suffix == ".tsv":
            with path.open(encoding="utf-8", newline="") as f:
                return _qrels_rows(csv.reader(f, delimiter="\t"), path)
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as z:
                if SCIFACT_TRAIN_CLAIMS not in z.namelist():
                    raise DatasetError(f"{path} holds no {SCIFACT_TRAIN_CLAIMS}")
                return _claims(io.TextIOWrapper(z.open(SCIFACT_TRAIN_CLAIMS), encoding="utf-8"), path)
        if path.suffix == ".csv":
            with path.open(encoding="utf-8", newline="") as f:
                return _claims(f, path)
    except (zipfile.BadZipFile, UnicodeDecodeError, csv.Error) as exc:
        raise DatasetError(f"{path}: {exc}") from None
    raise DatasetError(f"{path}: expected a BEIR qrels .tsv, or SciFact's claims (.csv, or its .zip)")


def _qrels_rows(rows: Iterable[list[str]], origin: Path) -> Qrels:
    qrels: Qrels = {}
    for line, row in enumerate(rows, start=1):
        if not row or row[0] == "query-id":
            continue
        if len(row) != 3 or not row[2].lstrip("-").isdigit():
            raise DatasetError(f"{origin}:{line}: expected query-id, corpus-id and an integer score")
        qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    return qrels


def _claims(lines: Iterable[str], origin: Path) -> Qrels:
    qrels: Qrels = {}
    reader = csv.DictReader(lines)
    if not {"id", "evidence_doc_id"} <= set(reader.fieldnames or ()):
        raise DatasetError(f"{origin}: not SciFact's claims (no id and evidence_doc_id columns)")
    for row in reader:
        if row["evidence_doc_id"]:
            qrels.setdefault(row["id"], {})[row["evidence_doc_id"]] = 1
    return qrels


def meets(effect: Mapping[str, float], max_ndcg_loss: float, min_dropped: float) -> bool:
    # nDCG is reported to 4 decimals: a loss of exactly the target must not fail on float noise.
    return (
        round(effect["ndcg@10_without"] - effect["ndcg@10"], 4) <= max_ndcg_loss
        and effect["irrelevant_dropped"] >= min_dropped
    )


def choose_floor(
    effects: Mapping[float, Mapping[str, float]], max_ndcg_loss: float, min_dropped: float
) -> float | None:
    """The middle of the floors whose effect meets both targets (the lower of two middles), or
    None when none does."""
    passing = sorted(f for f, e in effects.items() if meets(e, max_ndcg_loss, min_dropped))
    return statistics.median_low(passing) if passing else None


def calibration_set(folder: Path, qrels_path: Path) -> tuple[dict[str, str], Qrels]:
    """The calibration queries' texts (from the dataset's queries.jsonl) and judgments."""
    qrels = load_calibration_qrels(qrels_path)
    texts = load_queries(folder)
    missing = [q for q in qrels if q not in texts]
    if missing:
        raise DatasetError(f"{len(missing)} calibration queries have no text, e.g. {missing[:3]}")
    return {q: texts[q] for q in qrels}, qrels


def run_floor_calibration(
    dataset: BeirDataset,
    calibration_queries: Mapping[str, str],
    calibration: Qrels,
    *,
    embedder: Embedder | None = None,
    cache: EmbeddingCache | None = None,
    floors: tuple[float, ...] = FLOORS,
    max_ndcg_loss: float = MAX_NDCG_LOSS,
    min_dropped: float = MIN_DROPPED,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Index `dataset`'s corpus, choose a floor on `calibration`, judge it on `dataset`'s split."""
    started = time.perf_counter()
    shared = sorted(set(calibration) & set(dataset.qrels))
    if shared:
        raise DatasetError(f"{len(shared)} calibration queries are judged queries too, e.g. {shared[:3]}")
    # A claim whose evidence is outside the corpus cannot be found: it would only add noise.
    known = set(dataset.doc_ids)
    calibration = {q: docs for q, docs in calibration.items() if any(d in known for d in docs)}
    if not calibration:
        raise DatasetError("no calibration query has a judged document in the corpus")
    queries = {q: calibration_queries[q] for q in calibration}
    report: dict[str, Any] = {
        "dataset": dataset.name,
        "judged_split": dataset.split,
        "judged_queries": len(dataset.queries),
        "calibration_queries": len(queries),
        "mode": SearchMode.HYBRID.value,
        "targets": {"max_ndcg@10_loss": max_ndcg_loss, "min_irrelevant_dropped": min_dropped},
    }
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mnemo-floor-")))
        bars = stack.enter_context(Bars(show_progress))
        index = HybridIndex.open(
            directory,
            embedder=embedder or OnnxEmbedder(),
            encoding=fitted_encoding(dataset, None),
            search_settings=SearchSettings(candidates=DEPTH),
            cache=cache,
        )
        stack.callback(index.close)
        report["ingest"] = ingest_dataset(index, dataset, bars.task("ingest", len(dataset.doc_ids)))

        hybrid = SearchMode.HYBRID
        base, _ = rank_queries(index, queries, hybrid, bars.task("calibration", len(queries)))
        sweep: dict[float, dict[str, float]] = {}
        for floor in floors:
            ranked, _ = rank_queries(index, queries, hybrid, bars.task(f"floor {floor}", len(queries)), floor)
            sweep[floor] = floor_effect(calibration, base, ranked)
        chosen = choose_floor(sweep, max_ndcg_loss, min_dropped)
        report["calibration"] = {
            "floors_meeting_targets": [f for f, e in sweep.items() if meets(e, max_ndcg_loss, min_dropped)],
            "chosen_floor": chosen,
            "sweep": {str(f): e for f, e in sweep.items()},
        }
        if chosen is not None:
            judged_queries = dataset.queries
            judged_base, _ = rank_queries(
                index, judged_queries, hybrid, bars.task("judged", len(judged_queries))
            )
            judged, _ = rank_queries(
                index, judged_queries, hybrid, bars.task(f"judged {chosen}", len(judged_queries)), chosen
            )
            report["judged"] = floor_effect(dataset.qrels, judged_base, judged)
    report["meets"] = "judged" in report and meets(report["judged"], max_ndcg_loss, min_dropped)
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report
