"""Alembic environment: migrations run on the connection the archive store hands over."""

from __future__ import annotations

from alembic import context

from mnemo_sea.archive.storage.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "run migrations through mnemo_sea.archive.storage.store.upgrade(): it passes a connection"
    )

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
