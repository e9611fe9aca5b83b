"""The system: the archive and the index composed into the one facade users call.

    mnemo            `Mnemo`, the facade: every operation of every surface is one of its methods,
                     or (reads that need no index) of the `Archive` it holds as `Mnemo.archive`
    opening          opening the system a long-running surface runs on, from settings
    settings         `MnemoSettings` (MNEMO_* environment variables)
    indexer          the outbox drain that keeps the index a projection of the archive
    worker           `mnemo-sea worker`: the drain as its own process
    caches           the search-result cache (in process, or Redis shared by processes)
    citations        checking an answer's citations against the archive
    documents        reading users' files (JSONL, Markdown, text) into evidence
    bulk_ingest      `load`: documents to the archive and index in batches, with progress
    fsck             the consistency check of archive, blobs and index
    hashing_embedder a deterministic embedder for tests and offline runs
    json_ready       domain values as JSON-ready data for the surfaces that print or return them
    outcomes         the one error table: each error category's REST status, exit code, MCP category

Nothing here imports a surface (rest, mcp, cli) or eval; the import contract checks it.
"""
