"""The index as a projection of the archive: the outbox indexer that applies each write, and
the documents it builds from archive records (built again by fsck to compare).
"""
