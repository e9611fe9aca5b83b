"""Engine-level index parameters shared by both backends.

Every search is filtered to one tenant, so a global HNSW graph would only be walked through
the tenant filter; instead `hnsw_m=0` skips it and `hnsw_payload_m` builds one graph per value
of the tenant index (Qdrant's recommended multi-tenant layout). A tenant whose vectors take
less than `full_scan_threshold_kb` is scored exactly, which at 384 float32 dimensions is about
6,600 points for the default; exact scoring of a few thousand vectors takes well under a
millisecond and has perfect recall.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IndexTuning:
    hnsw_m: int = 0
    hnsw_payload_m: int = 16
    hnsw_ef_construct: int = 100
    full_scan_threshold_kb: int = 10_000
