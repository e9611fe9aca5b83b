"""Request ids, JSON access logs that leak neither keys nor content, and Prometheus metrics."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from rest_helpers import OPERATOR_TENANT, Api, assert_problem, evidence
from sqlalchemy import func, select, update

from mnemo_sea.archive.storage import schema as t
from mnemo_sea.rest.app import create_app
from mnemo_sea.rest.observability import JsonFormatter
from mnemo_sea.system.mnemo import Mnemo

GENERATED_ID = re.compile(r"^[0-9a-f]{32}$")


class Lines(logging.Handler):
    """Collects records formatted as the service writes them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def entries(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines]


@pytest.fixture
def access_log() -> Iterator[Lines]:
    logger = logging.getLogger("mnemo_sea.access")
    handler = Lines()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_a_request_id_is_echoed_or_generated(api: Api) -> None:
    given = api.client.get("/v1/health/live", headers={"X-Request-ID": "trace-42.a_b"})
    assert given.headers["x-request-id"] == "trace-42.a_b"
    problem = api.client.get("/v1/evidence/x", headers={"X-Request-ID": "trace-43"})
    assert assert_problem(problem, 401)["request_id"] == "trace-43"

    absent = api.client.get("/v1/health/live")
    assert GENERATED_ID.fullmatch(absent.headers["x-request-id"])
    ids = {api.client.get("/v1/health/live").headers["x-request-id"] for _ in range(3)}
    assert len(ids) == 3
    for malformed in ("has spaces", "x" * 65, "new\\nline", "<script>"):
        response = api.client.get("/v1/health/live", headers={"X-Request-ID": malformed})
        assert GENERATED_ID.fullmatch(response.headers["x-request-id"]), malformed


def test_access_logs_are_json_lines_without_keys_or_content(api: Api, access_log: Lines) -> None:
    key = api.key("agent", subject="agent-7")
    secret_text = "patient Rex has FIV, owner phone 0412 555 019"
    headers = {"Authorization": f"Bearer {key}", "X-Request-ID": "req-1"}
    api.client.post(
        "/v1/sessions/visit-9/results", json={"tool_name": "t", "content": secret_text}, headers=headers
    )
    api.client.post(
        "/v1/evidence", json=evidence("e", secret_text), headers={**headers, "X-Request-ID": "req-2"}
    )
    api.client.post("/v1/search", json={"query": secret_text}, headers={**headers, "X-Request-ID": "req-3"})
    api.client.get("/v1/evidence/e", headers={"X-API-Key": "msk_bogus_secret", "X-Request-ID": "req-4"})

    entries = {e["request_id"]: e for e in access_log.entries() if e["logger"] == "mnemo_sea.access"}
    assert set(entries) >= {"req-1", "req-2", "req-3", "req-4"}
    recorded = entries["req-1"]
    assert recorded["route"] == "/v1/sessions/{session_id}/results"  # the template, not the ids
    assert (recorded["method"], recorded["status"]) == ("POST", 201)
    assert (recorded["tenant_id"], recorded["subject"]) == (api.tenant, "agent-7")
    assert recorded["duration_ms"] >= 0 and recorded["level"] == "info"
    assert entries["req-4"]["status"] == 401 and entries["req-4"]["tenant_id"] is None

    everything = "\n".join(access_log.lines)
    secret = key.split("_", 2)[2]
    for leak in (secret, key, "msk_bogus_secret", "Rex", "0412", "visit-9"):
        assert leak not in everything, leak


def _operator(api: Api) -> dict[str, str]:
    return {"Authorization": f"Bearer {api.key('admin', subject='sre', tenant=OPERATOR_TENANT)}"}


def _metrics(api: Api) -> dict[str, Any]:
    response = api.client.get("/metrics", headers=_operator(api))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {family.name: family for family in text_string_to_metric_families(response.text)}


def _value(family: Any, sample_name: str, **labels: str) -> float:
    for sample in family.samples:
        if sample.name == sample_name and all(sample.labels.get(k) == v for k, v in labels.items()):
            return float(sample.value)
    raise AssertionError(f"no sample {sample_name} {labels} in {family.samples}")


def test_metrics_need_an_admin_key_of_the_operator_tenant(api: Api) -> None:
    assert_problem(api.client.get("/metrics"), 401)
    assert_problem(api.client.get("/metrics", headers=api.headers("agent")), 403)
    # They cover every tenant, so a tenant's own admin may not read them.
    assert_problem(api.client.get("/metrics", headers=api.headers("admin")), 403)
    assert api.client.get("/metrics", headers=_operator(api)).status_code == 200


def test_metrics_expose_latency_outbox_and_cache(api: Api) -> None:
    agent = api.headers("agent")
    api.client.post("/v1/evidence", json=evidence("m", "gabapentin for cats"), headers=agent)
    before = _metrics(api)
    hits_before = _value(before["mnemo_cache_hits"], "mnemo_cache_hits_total", cache="search")
    for _ in range(2):  # the second identical search is answered from the cache
        api.client.post("/v1/search", json={"query": "gabapentin"}, headers=agent)
    families = _metrics(api)

    latency = families["mnemo_http_request_duration_seconds"]
    count = _value(
        latency, "mnemo_http_request_duration_seconds_count", method="POST", route="/v1/search", status="200"
    )
    assert count >= 2
    assert {s.labels.get("route") for s in latency.samples} >= {"/v1/evidence", "/v1/search"}
    assert _value(families["mnemo_outbox_pending"], "mnemo_outbox_pending") == 0
    assert _value(families["mnemo_outbox_lag_seconds"], "mnemo_outbox_lag_seconds") == 0
    hits = _value(families["mnemo_cache_hits"], "mnemo_cache_hits_total", cache="search")
    assert hits >= hits_before + 1
    assert "mnemo_cache_misses" in families


def test_metrics_count_the_rows_awaiting_the_group_commit_as_the_table_holds_them(api: Api) -> None:
    agent = api.headers("agent")
    operator = _operator(api)
    api.client.post("/v1/evidence", json=evidence("g", "written, maybe not yet flushed"), headers=agent)

    def gauge() -> float:
        families = {
            f.name: f
            for f in text_string_to_metric_families(api.client.get("/metrics", headers=operator).text)
        }
        return _value(families["mnemo_outbox_awaiting_flush"], "mnemo_outbox_awaiting_flush")

    def stored() -> int:
        with api.mnemo.archive.store.read() as conn:
            rows = conn.execute(select(t.outbox.c.applied_at, t.outbox.c.done_at)).all()
        return sum(1 for applied, done in rows if applied is not None and done is None)

    api.mnemo.sync()  # the flush: every applied row is done
    assert gauge() == stored() == 0
    # A row applied whose flush has not come yet (the group commit's window, as a kill -9
    # would leave it): the gauge counts it, and the pending gauge does not.
    with api.mnemo.archive.store.write() as conn:
        row_id = conn.execute(select(func.max(t.outbox.c.id))).scalar_one()
        applied = conn.execute(select(t.outbox.c.done_at).where(t.outbox.c.id == row_id)).scalar_one()
        conn.execute(update(t.outbox).where(t.outbox.c.id == row_id).values(applied_at=applied, done_at=None))
    assert gauge() == stored() == 1
    families = {
        f.name: f for f in text_string_to_metric_families(api.client.get("/metrics", headers=operator).text)
    }
    assert _value(families["mnemo_outbox_pending"], "mnemo_outbox_pending") == 0


def test_metrics_show_an_outbox_backlog_until_it_is_drained(api: Api) -> None:
    # The same stores, with writes left to an outbox worker (as API processes run in server mode).
    deferred = Mnemo(api.mnemo.archive, api.mnemo.index, api.mnemo.cache, sync_writes=False)
    client = TestClient(create_app(deferred, api.system.app.state.settings))
    admin = api.headers("admin")
    operator = _operator(api)
    assert (
        client.post("/v1/evidence", json=evidence("later", "indexed later"), headers=admin).status_code == 201
    )

    def pending() -> tuple[float, float]:
        families = {
            f.name: f for f in text_string_to_metric_families(client.get("/metrics", headers=operator).text)
        }
        return (
            _value(families["mnemo_outbox_pending"], "mnemo_outbox_pending"),
            _value(families["mnemo_outbox_lag_seconds"], "mnemo_outbox_lag_seconds"),
        )

    count, lag = pending()
    assert count >= 1 and lag >= 0
    api.mnemo.sync()
    assert pending() == (0, 0)


def test_a_server_error_is_logged_and_carries_the_request_id(
    api: Api, access_log: Lines, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(api.mnemo.archive, "get_summary", broken)
    client = TestClient(api.system.app, raise_server_exceptions=False)
    headers = {**api.headers("reader"), "X-Request-ID": "req-500"}
    response = client.get("/v1/summaries/sum:1", headers=headers)
    assert response.status_code == 500
    assert response.headers["x-request-id"] == "req-500" and response.json()["request_id"] == "req-500"
    entry = next(e for e in access_log.entries() if e.get("request_id") == "req-500")
    assert (entry["status"], entry["route"], entry["tenant_id"]) == (
        500,
        "/v1/summaries/{summary_id}",
        api.tenant,
    )
