from __future__ import annotations

import pytest

from mnemo_sea.archive import Archive, ArchiveConflict, BatchRejected, NotFound, Principal


def test_record_archive_recover_round_trip(archive: Archive, agent: Principal) -> None:
    r1 = archive.record(agent, "s1", "logs.search", "trace: timeout after 30s", arguments={"q": "O-1042"})
    r2 = archive.record(agent, "s1", "inventory.check", "stock: 3", policy_class="stock")
    assert (r1.result_id, r2.result_id) == ("r1", "r2")

    with pytest.raises(BatchRejected) as rejected:
        archive.archive_results(agent, "s1", [{"id": "r1", "note": "timeout"}, {"id": "r7", "note": "x"}])
    assert {t.result_id: t.status for t in rejected.value.targets} == {"r1": "ok", "r7": "unknown"}
    assert all(r.state == "live" for r in archive.list_results(agent, "s1"))

    receipt = archive.archive_results(
        agent, "s1", [{"id": "r1", "note": "logistics timed out"}, ("r2", "stock 3")]
    )
    assert receipt.archived == ("r1", "r2")
    with pytest.raises(ArchiveConflict):
        archive.archive_results(agent, "s1", [("r1", "again")])

    recovered = archive.recover(agent, "s1", "r2")
    assert recovered.content == b"stock: 3"
    assert recovered.appended.result_id == "r3"
    assert recovered.staleness_warning is not None and "re-query" in recovered.staleness_warning


def test_other_tenant_sees_nothing(archive: Archive, agent: Principal, other_tenant: Principal) -> None:
    archive.record(agent, "s1", "t", "secret")
    with pytest.raises(NotFound):
        archive.live_view(other_tenant, "s1")
    with pytest.raises(NotFound):
        archive.recover(other_tenant, "s1", "r1")
