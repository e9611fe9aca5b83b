"""The archive's storage: the database, its schema and statements, blobs, the audit chain,
receipts and keys, the outbox, idempotent replies and locks.

Plumbing the features stand on; it knows the rules, never a feature. Nothing outside
`mnemo_sea.archive` and `mnemo_sea.system` imports it (a contract in pyproject.toml).
"""
