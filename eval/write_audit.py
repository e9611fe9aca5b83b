"""The audit after a run: the archive held against what each client was told.

- every acknowledged record (201) is still there and recovers byte for byte (sha256);
- nothing is stored that a client was not told was stored: a result, an archive state or a
  recovery copy present although its request failed is reported with the failure it had
  (a 503 promises that nothing was written, so one written anyway is a bug).

It runs through the API, with every store up, and ends by archiving every acknowledged
record still live and recovering each of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

from .api_clients import AgentClient, SentRecord, recovered_matches

FINDINGS = (
    # an acknowledged write that is not there (or not exact)
    "lost",
    "mismatched",
    "archive_lost",
    "recovery_copy_lost",
    "bad_recovery_during_run",
    # a write that is there although its request failed
    "written_despite_503",
    "written_unacknowledged",
    "archived_despite_503",
    "archived_unacknowledged",
    "recovered_despite_503",
    "recovered_unacknowledged",
    "phantom",
)


@dataclass
class Audit:
    """What the archive holds against what the clients were told. Findings are lists of
    `session/result: why`; a clean audit has every finding empty."""

    acknowledged: int = 0
    verified: int = 0
    failed_writes_absent: int = 0  # failed requests that indeed left nothing behind
    findings: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in FINDINGS})

    def add(self, kind: str, item: str) -> None:
        self.findings[kind].append(item)

    def merge(self, other: Audit) -> None:
        self.acknowledged += other.acknowledged
        self.verified += other.verified
        self.failed_writes_absent += other.failed_writes_absent
        for kind, items in other.findings.items():
            self.findings[kind].extend(items)

    @property
    def clean(self) -> bool:
        return not any(self.findings.values())

    def to_dict(self, examples: int = 5) -> dict[str, Any]:
        return {
            "acknowledged_records": self.acknowledged,
            "verified_records": self.verified,
            "lost": len(self.findings["lost"]),
            "mismatched": len(self.findings["mismatched"]),
            "failed_writes_left_nothing": self.failed_writes_absent,
            "findings": {k: len(v) for k, v in self.findings.items()},
            "examples": {k: v[:examples] for k, v in self.findings.items() if v},
            "clean": self.clean,
        }


def _list_results(http: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        response = http.get(f"/v1/sessions/{session_id}/results", params={"offset": offset, "limit": 500})
        if response.status_code == 404 and offset == 0:
            return []  # no record of the session was ever stored
        response.raise_for_status()
        page = response.json()
        items.extend(page["items"])
        offset = page["next_offset"]
    return items


def audit_all(clients: list[AgentClient], base_url: str, *, workers: int = 8) -> Audit:
    """`audit` of every client (a few at a time), merged."""
    total = Audit()
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(clients)))) as pool:
        for one in pool.map(lambda c: audit(c, base_url), clients):
            total.merge(one)
    return total


def audit(client: AgentClient, base_url: str, *, timeout_s: float = 60.0) -> Audit:
    """Hold the session's stored results against the client's ledger, then make every
    acknowledged record archived and recover it, checking its bytes against what was sent.

    Call with every store up: an HTTP failure here is raised (httpx.HTTPStatusError), not
    counted, since it says nothing about what was written.
    """
    out = Audit()
    sid = client.session_id
    headers = {"Authorization": f"Bearer {client.api_key}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=timeout_s) as http:
        stored = _list_results(http, sid)
        originals = {r["result_id"]: r for r in stored if r["recovered_from"] is None}
        copies = Counter(r["recovered_from"] for r in stored if r["recovered_from"] is not None)

        acked = [s for s in client.sent if s.outcome == "acked"]
        out.acknowledged = len(acked)
        for s in acked:
            assert s.result_id is not None
            found = originals.get(s.result_id)
            if found is None:
                out.add("lost", f"{sid}/{s.result_id}: acknowledged, not stored")
            elif found["content_sha256"] != s.sha256:
                out.add("mismatched", f"{sid}/{s.result_id}: stored sha256 differs from the sent one")

        acked_ids = {s.result_id for s in acked}
        failed_by_sha = {s.sha256: s for s in client.sent if s.outcome != "acked"}
        present = {r["content_sha256"] for rid, r in originals.items() if rid not in acked_ids}
        for rid, r in originals.items():
            if rid in acked_ids:
                continue
            request = failed_by_sha.get(r["content_sha256"])
            if request is None:
                out.add("phantom", f"{sid}/{rid}: stored, matches no request of this client")
            elif request.outcome == "503":
                out.add("written_despite_503", f"{sid}/{rid}: record answered 503 {request.detail}")
            else:
                out.add(
                    "written_unacknowledged",
                    f"{sid}/{rid}: record answered {request.outcome} {request.detail}",
                )
        out.failed_writes_absent += sum(1 for sha in failed_by_sha if sha not in present)

        _audit_archives(client, originals, out)
        _audit_recoveries(client, copies, out)
        out.failed_writes_absent += sum(
            1 for rid in client.archive_failed if originals.get(rid, {}).get("state") == "live"
        )
        for rid in client.bad_recoveries:
            out.add("bad_recovery_during_run", f"{sid}/{rid}: a 200 recovery did not hash-verify")

        _verify_recoverable(http, client, acked, originals, out)
    return out


def _audit_archives(client: AgentClient, originals: Mapping[str, dict[str, Any]], out: Audit) -> None:
    sid = client.session_id
    for rid in client.archived:
        if originals.get(rid, {}).get("state") != "archived":
            out.add("archive_lost", f"{sid}/{rid}: archive acknowledged, result is not archived")
    for rid, failure in client.archive_failed.items():
        if originals.get(rid, {}).get("state") == "archived":
            kind = "archived_despite_503" if failure.startswith("503") else "archived_unacknowledged"
            out.add(kind, f"{sid}/{rid}: archive answered {failure}")
    for rid in client.live:
        if originals.get(rid, {}).get("state") == "archived":
            out.add("phantom", f"{sid}/{rid}: archived, though no archive request of it was sent")


def _audit_recoveries(client: AgentClient, copies: Mapping[str, int], out: Audit) -> None:
    sid = client.session_id
    for rid in sorted(set(copies) | set(client.recovers_ok)):
        have, acked = copies.get(rid, 0), client.recovers_ok.get(rid, 0)
        if have < acked:
            out.add("recovery_copy_lost", f"{sid}/{rid}: {acked} recoveries acknowledged, {have} copies")
        failures = client.recovers_failed.get(rid, [])
        for failure in failures[: max(0, have - acked)]:
            kind = "recovered_despite_503" if failure.startswith("503") else "recovered_unacknowledged"
            out.add(kind, f"{sid}/{rid}: a recovery copy exists for a request answered {failure}")
        if have - acked > len(failures):
            out.add(
                "phantom", f"{sid}/{rid}: {have - acked - len(failures)} recovery copies nobody asked for"
            )
        out.failed_writes_absent += max(0, len(failures) - max(0, have - acked))


def _verify_recoverable(
    http: httpx.Client,
    client: AgentClient,
    acked: list[SentRecord],
    originals: Mapping[str, dict[str, Any]],
    out: Audit,
) -> None:
    sid = client.session_id
    # Lost and mismatched ones are reported already; these are stored as they were sent.
    present = [s for s in acked if originals.get(str(s.result_id), {}).get("content_sha256") == s.sha256]
    still_live = [s.result_id for s in present if originals[str(s.result_id)]["state"] == "live"]
    for start in range(0, len(still_live), 500):
        targets = [{"result_id": rid, "note": "audit"} for rid in still_live[start : start + 500]]
        http.post(f"/v1/sessions/{sid}/archive", json={"targets": targets}).raise_for_status()
    for s in present:
        response = http.post(f"/v1/sessions/{sid}/results/{s.result_id}/recover")
        if response.status_code >= 500:
            response.raise_for_status()  # a store is down: this says nothing about the write
        if response.status_code != 200:
            out.add("lost", f"{sid}/{s.result_id}: recover answered {response.status_code}")
        elif not recovered_matches(response.json(), s.sha256):
            out.add("mismatched", f"{sid}/{s.result_id}: recovered bytes do not hash to the sent sha256")
        else:
            out.verified += 1
