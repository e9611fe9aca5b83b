"""Read a BEIR-layout dataset folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.

Documents are indexed as `title + " " + text` (stripped), as BEIR's lexical and dense
baselines do. Only queries that have at least one judgment in the split are evaluated, and a
judgment of grade 0 counts as judged-irrelevant (pytrec_eval ignores it for gains).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BeirDataset:
    name: str
    split: str
    doc_ids: tuple[str, ...]
    doc_texts: tuple[str, ...]
    queries: dict[str, str]  # only the queries judged in `split`
    qrels: dict[str, dict[str, int]]


class DatasetError(Exception):
    """The folder is not a readable BEIR dataset; the message says which file and why."""


def load_queries(folder: str | Path) -> dict[str, str]:
    """Every query of the folder's queries.jsonl, judged in some split or not: id -> text."""
    path = Path(folder) / "queries.jsonl"
    if not path.is_file():
        raise DatasetError(f"{path} is missing (expected BEIR layout: corpus.jsonl, queries.jsonl, qrels/)")
    queries: dict[str, str] = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                q = json.loads(line)
                queries[str(q["_id"])] = str(q["text"])
    return queries


def load_beir(folder: str | Path, split: str = "test") -> BeirDataset:
    root = Path(folder)
    corpus_path, queries_path, qrels_path = (
        root / "corpus.jsonl",
        root / "queries.jsonl",
        root / "qrels" / f"{split}.tsv",
    )
    for path in (corpus_path, queries_path, qrels_path):
        if not path.is_file():
            raise DatasetError(
                f"{path} is missing (expected BEIR layout: corpus.jsonl, queries.jsonl, qrels/)"
            )
    ids: list[str] = []
    texts: list[str] = []
    with corpus_path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
                ids.append(str(doc["_id"]))
                texts.append(f"{doc.get('title') or ''} {doc.get('text') or ''}".strip())
            except (ValueError, KeyError) as exc:
                raise DatasetError(f"{corpus_path}:{line_no}: {exc}") from None
    qrels: dict[str, dict[str, int]] = {}
    with qrels_path.open(encoding="utf-8", newline="") as f:
        rows = csv.reader(f, delimiter="\t")
        for row in rows:
            if not row or row[0] == "query-id":
                continue
            qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    all_queries = load_queries(root)
    missing = [q for q in qrels if q not in all_queries]
    if missing:
        raise DatasetError(
            f"{len(missing)} judged queries have no text in {queries_path}, e.g. {missing[:3]}"
        )
    queries = {q: all_queries[q] for q in qrels}
    return BeirDataset(root.name, split, tuple(ids), tuple(texts), queries, qrels)
