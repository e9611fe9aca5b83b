"""Helpers of the REST API tests: one test's tenant on a shared app, keys, and problem checks."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fastapi import FastAPI
from fastapi.testclient import TestClient

from mnemo_sea.archive.features.api_keys import create_key
from mnemo_sea.system.mnemo import Mnemo

PROBLEM_JSON = "application/problem+json"
OPERATOR_TENANT = "ops"  # MNEMO_OPERATOR_TENANT of the test apps: its admins read /metrics


class HttpResponse(Protocol):
    """What the tests read of a TestClient response."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def text(self) -> str: ...
    def json(self) -> Any: ...


@dataclass
class System:
    """An opened Mnemo served by the REST app: `embedded` (SQLite + Qdrant Edge in a folder) or
    `server` (PostgreSQL + Redis + qdrant-client). `data_dir` / `database_url` say where it lives."""

    mode: str
    mnemo: Mnemo
    app: FastAPI
    client: TestClient
    data_dir: Path | None = None
    database_url: str | None = None


@dataclass
class Api:
    """One test's own tenant on a shared system (tenants are the isolation boundary, so tests
    sharing an app never see each other's records), with keys minted on demand."""

    system: System
    tenant: str = field(default_factory=lambda: f"t-{uuid.uuid4().hex[:12]}")

    @property
    def client(self) -> TestClient:
        return self.system.client

    @property
    def mnemo(self) -> Mnemo:
        return self.system.mnemo

    def key(
        self,
        *roles: str,
        subject: str | None = None,
        clearance: str = "internal",
        tenant: str | None = None,
    ) -> str:
        """A fresh API key (the secret, shown once) for a principal of this tenant by default."""
        secret, _ = create_key(
            self.mnemo.archive.store,
            tenant_id=tenant or self.tenant,
            subject=subject or f"{(roles or ('agent',))[0]}-1",
            roles=roles or ("agent",),
            clearance=clearance,
        )
        return secret

    def headers(
        self,
        *roles: str,
        subject: str | None = None,
        clearance: str = "internal",
        tenant: str | None = None,
    ) -> dict[str, str]:
        key = self.key(*roles, subject=subject, clearance=clearance, tenant=tenant)
        return {"Authorization": f"Bearer {key}"}

    def other_tenant(self) -> Api:
        """Another tenant on the same system."""
        return Api(self.system)


def assert_problem(response: HttpResponse, status: int, code: str | None = None) -> dict[str, Any]:
    """The response is an RFC 9457 problem with this status (and code); returns its body."""
    assert response.status_code == status, (response.status_code, response.text[:2000])
    assert response.headers["content-type"].startswith(PROBLEM_JSON), response.headers["content-type"]
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["type"].endswith(body["code"])
    assert body["request_id"] == response.headers["x-request-id"]
    if code is not None:
        assert body["code"] == code, body
    return body


def evidence(evidence_id: str, body: str, **extra: Any) -> dict[str, Any]:
    return {"evidence_id": evidence_id, "body": body, "source": "kb", **extra}
