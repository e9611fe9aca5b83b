"""The default embedder, ONNX Runtime on an export of the packaged model, gives torch's vectors.

The export of all-MiniLM-L6-v2 is made once for this module (a few seconds) into a temporary
cache folder; the tests of a damaged cache use a tiny BERT made here (random weights, the real
tokenizer), whose export takes a fraction of a second.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mnemo_sea.retrieval import (
    DEFAULT_MODEL_ID,
    HybridIndex,
    IndexUnavailable,
    ModelExportError,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    default_model_path,
)
from mnemo_sea.retrieval.embedding_cache import CachingEmbedder
from mnemo_sea.retrieval.onnx_export import MANIFEST_FILE, MIN_COSINE, MODEL_FILE, source_digest
from mnemo_sea.retrieval.query_embedding import QueryEmbedder

ENGLISH = [
    "refund policy for annual plans",
    "0-dimensional biomaterials lack inductive properties.",
    "What is the deadline for the database migration, and who signed off on it?",
    "The courier left the parcel at the back door.",
]
CHINESE = ["儿童远视眼怎么恢复视力", "受精七天后有什么怀孕征兆", "订单延迟 refund 退款", "猫咪呕吐黄水怎么办"]
SENTENCES = ENGLISH + CHINESE


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a.astype(np.float64) * b.astype(np.float64), axis=1)


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def minilm(cache_root: Path) -> OnnxEmbedder:
    embedder = OnnxEmbedder(cache_dir=cache_root)
    assert embedder.dimension == 384  # exports here, once for the module
    return embedder


@pytest.fixture(scope="module")
def torch_minilm() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


def test_onnx_vectors_match_torch_on_english_and_chinese(
    minilm: OnnxEmbedder, torch_minilm: SentenceTransformerEmbedder
) -> None:
    assert minilm.model_id == DEFAULT_MODEL_ID == torch_minilm.model_id  # indexes open with either
    expected_docs = torch_minilm.embed_documents(SENTENCES)
    expected_queries = torch_minilm.model.encode_query(
        SENTENCES, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
    )
    one_by_one = np.concatenate([minilm.embed_queries([s]) for s in SENTENCES])
    together = minilm.embed_documents(SENTENCES)  # sorted and padded to the longest in the batch
    for got in (one_by_one, together):
        assert got.dtype == np.float32 and got.shape == (len(SENTENCES), 384)
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-5)
        assert _cosines(got, expected_docs).min() >= MIN_COSINE
        assert _cosines(got, expected_queries).min() >= MIN_COSINE
    # The rows come back in the caller's order, not the length order they were encoded in.
    assert _cosines(together, expected_docs[::-1]).min() < 0.99
    assert minilm.embed_queries([]).shape == (0, 384)


def test_one_thread_session_gives_the_same_vectors(
    minilm: OnnxEmbedder, cache_root: Path, torch_minilm: SentenceTransformerEmbedder
) -> None:
    single = OnnxEmbedder(cache_dir=cache_root, threads=1)
    assert single.runtime_report()["exported_now"] is False  # the module's export, verified again
    rows = single.embed_queries(CHINESE)
    assert _cosines(rows, torch_minilm.embed_documents(CHINESE)).min() >= MIN_COSINE
    assert _cosines(rows, minilm.embed_queries(CHINESE)).min() >= 0.999999


def test_export_is_stored_with_hashes_of_its_source_and_its_files(minilm: OnnxEmbedder) -> None:
    report = minilm.runtime_report()
    folder = Path(report["export_folder"])
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    assert manifest["source_digest"] == source_digest(default_model_path())
    assert folder.name.startswith(manifest["source_digest"][:32])
    assert manifest["model_sha256"] == _sha256(folder / MODEL_FILE)
    assert manifest["tokenizer_sha256"] == _sha256(folder / "tokenizer.json")
    assert manifest["export_min_cosine"] >= MIN_COSINE
    assert any("\u4e00" <= ch <= "\u9fff" for probe in manifest["probes"] for ch in probe)
    assert len(manifest["probe_vectors"]) == len(manifest["probes"])
    assert report["runtime"] == "onnxruntime" and report["probe_min_cosine_to_torch"] >= MIN_COSINE
    # Nothing half-written is left beside the export.
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]


def test_a_verified_export_is_served_without_loading_torch(minilm: OnnxEmbedder, cache_root: Path) -> None:
    script = (
        "import sys, json\n"
        "from mnemo_sea.retrieval import OnnxEmbedder\n"
        f"e = OnnxEmbedder(cache_dir={str(cache_root)!r})\n"
        "row = e.embed_queries(['儿童远视眼怎么恢复视力'])[0]\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'now': e.runtime_report()['exported_now'],"
        " 'row': row.tolist()}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {**result, "torch": False, "now": False}
    expected = minilm.embed_queries(["儿童远视眼怎么恢复视力"])[0]
    assert float(np.dot(np.array(result["row"]), expected)) >= 0.999999


def test_query_cache_and_micro_batcher_serve_the_onnx_vectors(minilm: OnnxEmbedder) -> None:
    queries = QueryEmbedder(minilm, max_batch=4)
    try:
        first = queries.embed_queries(SENTENCES)
        again = queries.embed_queries(SENTENCES)
    finally:
        queries.close()
    assert queries.cache.hits == len(SENTENCES)
    np.testing.assert_array_equal(first, again)
    assert _cosines(first, minilm.embed_documents(SENTENCES)).min() >= 0.999999


def test_an_index_opened_without_an_embedder_uses_the_onnx_runtime(
    minilm: OnnxEmbedder, cache_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMO_MODEL_CACHE", str(cache_root))
    with HybridIndex.open(tmp_path / "ix") as index:
        assert isinstance(index.embedder, CachingEmbedder)
        assert isinstance(index.embedder.inner, OnnxEmbedder)
        used = index.embedder.inner.runtime_report()["export_folder"]
        assert used == minilm.runtime_report()["export_folder"]
        # Concurrent ONNX calls run in parallel: queries skip the micro-batcher, keep the cache.
        assert index.query_embedder.batcher is None
        index.query_embedder.embed_queries(["猫咪呕吐黄水怎么办"])
        index.query_embedder.embed_queries(["猫咪呕吐黄水怎么办"])
        assert index.query_embedder.cache.hits == 1


# ------------------------------------------------------------------ a damaged cache, bad models


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer BERT of width 32 with random (seeded) weights and all-MiniLM's tokenizer."""
    import torch
    from transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(13)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(folder)
    source = default_model_path()
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(source / name, folder / name)
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": 64, "do_lower_case": False})
    )
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True})
    )
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    return folder


@pytest.fixture(scope="module")
def tiny_export(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder holding the tiny model's export (copied by each test that damages it)."""
    root = tmp_path_factory.mktemp("tiny-cache")
    embedder = OnnxEmbedder(tiny_model, cache_dir=root)
    assert embedder.dimension == 32 and embedder.runtime_report()["exported_now"] is True
    return root


def _damaged_copy(tiny_export: Path, tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "cache"
    shutil.copytree(tiny_export, root)
    (folder,) = list(root.iterdir())
    return root, folder


def _assert_rebuilt(tiny_model: Path, root: Path, folder: Path, because: str) -> None:
    embedder = OnnxEmbedder(tiny_model, cache_dir=root)
    report = embedder.runtime_report()
    assert report["exported_now"] is True
    assert because in (report["rebuilt_because"] or "")
    # The stored state is whole again: the files match the fresh manifest, and the vectors torch's.
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    assert manifest["model_sha256"] == _sha256(folder / MODEL_FILE)
    expected = SentenceTransformerEmbedder(tiny_model).embed_documents(SENTENCES)
    assert _cosines(embedder.embed_documents(SENTENCES), expected).min() >= MIN_COSINE
    assert [p.name for p in root.iterdir()] == [folder.name]


def test_a_corrupted_graph_file_is_detected_and_exported_again(
    tiny_model: Path, tiny_export: Path, tmp_path: Path
) -> None:
    root, folder = _damaged_copy(tiny_export, tmp_path)
    graph = folder / MODEL_FILE
    data = bytearray(graph.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)  # zero 64 bytes of weights
    graph.write_bytes(bytes(data))
    _assert_rebuilt(tiny_model, root, folder, "model.onnx does not match its sha256")


def test_an_export_whose_vectors_drift_from_torch_is_discarded(
    tiny_model: Path, tiny_export: Path, tmp_path: Path
) -> None:
    # Files intact, but the vectors the graph must reproduce are not what it gives: only the
    # probe check can tell, so this is what it is for.
    root, folder = _damaged_copy(tiny_export, tmp_path)
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    manifest["probe_vectors"] = [[-x for x in row] for row in manifest["probe_vectors"]]
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest), encoding="utf-8")
    _assert_rebuilt(tiny_model, root, folder, "probe cosine")


def test_an_unreadable_manifest_is_discarded(tiny_model: Path, tiny_export: Path, tmp_path: Path) -> None:
    root, folder = _damaged_copy(tiny_export, tmp_path)
    text = (folder / MANIFEST_FILE).read_text(encoding="utf-8")
    (folder / MANIFEST_FILE).write_text(text[: len(text) // 2], encoding="utf-8")
    _assert_rebuilt(tiny_model, root, folder, "unreadable manifest")


def test_changed_model_files_get_an_export_of_their_own(
    tiny_model: Path, tiny_export: Path, tmp_path: Path
) -> None:
    changed = tmp_path / "changed"
    shutil.copytree(tiny_model, changed)
    (changed / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": 32, "do_lower_case": False})
    )
    root, folder = _damaged_copy(tiny_export, tmp_path)  # an intact export of the original
    embedder = OnnxEmbedder(changed, cache_dir=root)
    assert embedder.runtime_report()["exported_now"] is True
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [folder.name, Path(embedder.runtime_report()["export_folder"]).name]
    )


def test_a_missing_model_folder_is_a_typed_error(tmp_path: Path) -> None:
    embedder = OnnxEmbedder(tmp_path / "no-such-model", cache_dir=tmp_path / "cache")
    with pytest.raises(ModelExportError) as caught:
        embedder.embed_queries(["hello"])
    assert isinstance(caught.value, IndexUnavailable) and "does not exist" in caught.value.message
    assert not (tmp_path / "cache").exists()  # nothing exported, nothing half-written


def test_a_model_with_damaged_weights_is_a_typed_error(tiny_model: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model, broken)
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    embedder = OnnxEmbedder(broken, cache_dir=tmp_path / "cache")
    with pytest.raises(IndexUnavailable) as caught:
        embedder.embed_documents(["hello"])
    assert "broken" in caught.value.message
    assert list((tmp_path / "cache").iterdir()) == []  # the staging folder was removed


def test_an_unwritable_cache_folder_is_a_typed_error(tiny_model: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(ModelExportError) as caught:
        OnnxEmbedder(tiny_model, cache_dir=blocker / "cache").embed_queries(["hello"])
    assert "cache folder" in caught.value.message
