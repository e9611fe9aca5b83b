"""The embedded data folder's layout, known to `Mnemo.open`, the CLI and the embedder choice alike.

    <data folder>/archive.db   the SQLite archive (WAL mode)
    <data folder>/index/       the Qdrant Edge shard, its identity file and the embedding cache

Light on purpose (no imports): the CLI checks a folder before it pays for loading the index.
"""

ARCHIVE_FILE = "archive.db"
INDEX_DIR = "index"
