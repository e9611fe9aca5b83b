"""Evidence documents to index points: chunk, tokenize, BM25-encode, embed (in batches).

`prepare` is cheap (chunking and hashing, no model) and yields each chunk's point id and
payload, which is enough to tell whether the index already holds exactly this chunk. `encode`
does the expensive part for the chunks that need it: one batched embedding call per batch,
through the embedding cache when the embedder has one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .bm25 import Bm25Encoder, SparseVector, average_length
from .chunking import split_into_chunks
from .embedding import Embedder, Vectors
from .embedding_cache import CachingEmbedder
from .evidence import Chunk, EvidenceDocument, sha256_hex
from .points import IndexPoint, PointPayload, point_id
from .settings import EncodingSettings
from .tokenizer import Tokenizer


@dataclass(frozen=True)
class PreparedChunk:
    chunk: Chunk
    point_id: uuid.UUID
    payload: PointPayload
    searched: str  # what its vectors are built from: the chunk's text, after its document's heading


def searched_text(heading: str, chunk_text: str) -> str:
    return f"{heading}\n{chunk_text}" if heading else chunk_text


class PointEncoder:
    def __init__(self, encoding: EncodingSettings, embedder: Embedder) -> None:
        self.encoding = encoding
        self.tokenizer = Tokenizer(encoding.tokenizer)
        self.bm25 = Bm25Encoder(self.tokenizer, encoding.bm25)
        self.embedder = embedder

    def prepare(self, document: EvidenceDocument) -> list[PreparedChunk]:
        """The chunks of `document` with their point ids and payloads (no model involved)."""
        prepared = []
        for chunk in split_into_chunks(document.text, self.encoding.chunking):
            searched = searched_text(document.heading, chunk.text)
            payload = PointPayload(
                tenant_id=document.tenant_id,
                evidence_id=document.evidence_id,
                version=document.version,
                chunk=chunk.index,
                chunk_start=chunk.start,
                chunk_end=chunk.end,
                # The embedding cache's key: the hash of what is embedded. A chunk that is the
                # whole text under no heading (most short documents) has the document's own hash,
                # which EvidenceDocument checks against its text: 0.46 us of sha256 saved (timeit,
                # 250 characters).
                chunk_sha256=document.content_sha256 if searched == document.text else sha256_hex(searched),
                content_sha256=document.content_sha256,
                kind=document.kind,
                scope=document.scope,
                source=document.source,
                owner=document.owner,
                sensitivity=document.sensitivity,
                status=document.status,
                valid_from=document.valid_from_epoch,
                valid_until=document.valid_until_epoch,
            )
            pid = point_id(document.tenant_id, document.evidence_id, document.version, chunk.index)
            prepared.append(PreparedChunk(chunk, pid, payload, searched))
        return prepared

    def encode(
        self, chunks: Sequence[PreparedChunk], sparse: Sequence[SparseVector] | None = None
    ) -> list[IndexPoint]:
        """Points with both vectors for `chunks` (one batched embedding call); `sparse`: their
        sparse vectors, if the caller encoded them already (`encode_sparse`)."""
        texts = [c.searched for c in chunks]
        dense = self.embed(texts, [c.payload.chunk_sha256 for c in chunks])
        if sparse is None:
            sparse = self.encode_sparse(chunks)
        return [
            IndexPoint(prepared.point_id, prepared.payload, vector, terms)
            for prepared, vector, terms in zip(chunks, dense, sparse, strict=True)
        ]

    def encode_sparse(self, chunks: Sequence[PreparedChunk]) -> list[SparseVector]:
        """The BM25 vectors of `chunks` (no model involved)."""
        return [self.bm25.encode_document(c.searched) for c in chunks]

    def embed(self, texts: Sequence[str], hashes: Sequence[str]) -> Vectors:
        if isinstance(self.embedder, CachingEmbedder):
            return self.embedder.embed_documents_hashed(texts, hashes)
        return self.embedder.embed_documents(texts)


def fit_avg_doc_len(texts: Iterable[str], encoding: EncodingSettings) -> float:
    """The mean number of terms per chunk of `texts`: BM25's avgdl for a corpus loaded in bulk."""
    tokenizer = Tokenizer(encoding.tokenizer)
    counts = [
        len(tokenizer.tokenize(chunk.text))
        for text in texts
        for chunk in split_into_chunks(text, encoding.chunking)
    ]
    return average_length(counts)
