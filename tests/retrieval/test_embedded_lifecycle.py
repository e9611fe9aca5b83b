"""The embedded index on disk: one opener per path, settings that stick, data that survives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from mnemo_sea.retrieval import (
    AccessScope,
    Bm25Params,
    EncodingSettings,
    EvidenceDocument,
    HybridIndex,
    IndexConfigMismatch,
    IndexLocked,
    SearchMode,
    SearchQuery,
)


def test_second_opener_in_this_process_is_told_who_holds_the_index(
    tmp_path: Path, embedder_factory: type
) -> None:
    with HybridIndex.open(tmp_path / "ix", embedder=embedder_factory()):
        with pytest.raises(IndexLocked) as caught:
            HybridIndex.open(tmp_path / "ix", embedder=embedder_factory())
        holder = caught.value.holder
        assert holder is not None and holder.pid == os.getpid()
        assert f"pid {os.getpid()}" in caught.value.message
    HybridIndex.open(tmp_path / "ix", embedder=embedder_factory()).close()  # released on close


def test_second_opener_in_another_process_gets_a_clear_error(tmp_path: Path, embedder_factory: type) -> None:
    script = textwrap.dedent(
        f"""
        import json, sys
        from mnemo_sea.retrieval import HybridIndex, IndexLocked
        class E:
            model_id = "test-hashing-64"
            dimension = 64
        try:
            HybridIndex.open({str(tmp_path / "ix")!r}, embedder=E())
        except IndexLocked as exc:
            print(json.dumps(exc.to_dict()))
            sys.exit(3)
        """
    )
    with HybridIndex.open(tmp_path / "ix", embedder=embedder_factory()):
        done = subprocess.run(
            [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 3, done.stderr
    error = json.loads(done.stdout)
    assert error["code"] == "index_locked" and error["holder"]["pid"] == os.getpid()


def test_data_and_settings_survive_a_reopen(tmp_path: Path, embedder_factory: type) -> None:
    encoding = replace(EncodingSettings(), bm25=Bm25Params(k1=1.1, b=0.5, avg_doc_len=42.0))
    with HybridIndex.open(tmp_path / "ix", embedder=embedder_factory(), encoding=encoding) as index:
        index.upsert(
            [EvidenceDocument(tenant_id="acme", evidence_id="p", version=1, text="Refunds in 30 days.")]
        )
    with HybridIndex.open(tmp_path / "ix", embedder=embedder_factory()) as index:  # adopts stored settings
        assert index.encoding == encoding
        outcome = index.search(AccessScope("acme"), SearchQuery("refunds", mode=SearchMode.BM25))
        assert [h.evidence_id for h in outcome.hits] == ["p"]


def test_reopening_with_other_encoding_or_model_is_refused(tmp_path: Path, embedder_factory: type) -> None:
    HybridIndex.open(tmp_path / "ix", embedder=embedder_factory()).close()
    other = replace(EncodingSettings(), bm25=Bm25Params(k1=2.0, b=0.4))
    with pytest.raises(IndexConfigMismatch) as caught:
        HybridIndex.open(tmp_path / "ix", embedder=embedder_factory(), encoding=other)
    assert caught.value.field == "bm25.k1"
    with pytest.raises(IndexConfigMismatch) as caught:
        HybridIndex.open(tmp_path / "ix", embedder=embedder_factory(model_id="another-model"))
    assert caught.value.field == "model_id"
    HybridIndex.open(tmp_path / "ix", embedder=embedder_factory()).close()  # the refusals released the lock


def test_writes_are_durable_after_flush_even_without_close(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os
        import numpy as np
        from mnemo_sea.retrieval import EvidenceDocument, HybridIndex
        class E:
            model_id = "test-hashing-64"
            dimension = 64
            def embed_documents(self, texts):
                return np.tile(np.eye(64, dtype=np.float32)[0], (len(texts), 1))
        index = HybridIndex.open({str(tmp_path / "ix")!r}, embedder=E())
        doc = EvidenceDocument(tenant_id="acme", evidence_id="p", version=1, text="Refunds in 30 days.")
        index.upsert([doc])
        index.flush()
        os._exit(0)  # a crash: no close, no cleanup
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr

    class E:
        model_id = "test-hashing-64"
        dimension = 64

    with HybridIndex.open(tmp_path / "ix", embedder=E()) as index:  # type: ignore[arg-type]
        assert index.count("acme") == 1
