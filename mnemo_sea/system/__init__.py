"""The system: the archive and the index composed into the one facade users call. By job:

    opening | worker | fsck   what runs the facade: opening it from settings (for `serve`, `mcp`,
                              `worker`), the outbox drain as its own process, the consistency
                              check of archive, blobs and index
    mnemo                     `Mnemo`, the facade: every operation of every surface is one of its
                              methods, or (reads that need no index) of the `Archive` it holds
    results, operations       what the facade answers and the records of its own operations
    caches, citations         the search-result cache (in process, or Redis); checking an answer's
                              citations against the archive (and the cited-answers JSONL)
    documents                 reading users' files (JSONL, Markdown, text) into evidence
    projection/               the index as a projection of the archive: the outbox indexer and
                              the documents it builds from archive records
    wiring/                   settings (MNEMO_*), embedders, the data folder's layout
    outcomes, errors, json_ready, json_text
                              what every surface shares: the one error table, the system's own
                              errors, domain values as JSON, user JSON read under its caps

Nothing here imports a surface (rest, mcp, cli) or eval; the import contract checks it. Wiring
and projection stand below the facade (contracts too).
"""
