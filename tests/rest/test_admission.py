"""Fair shares of the API's thread pool: one tenant's flood never stalls another tenant.

The audit's repro: six oversized requests of one key filled the 4-thread pool and another
tenant's 50 ms search waited 50 s. Here the expensive work is a fake that blocks until the
test releases it, so the tests hold the flooding tenant's requests for as long as they like
and nothing depends on how fast the machine is: the admission controller alone (rest/admission.py),
then the real app over ASGI, with its authentication, problem answers and readiness probe.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastapi import APIRouter, FastAPI

from mnemo_sea.archive import Archive
from mnemo_sea.archive.features.api_keys import create_key
from mnemo_sea.archive.storage.verified_keys import VerifiedKeys
from mnemo_sea.rest.admission import TenantAdmission, TenantLoad
from mnemo_sea.rest.app import create_app
from mnemo_sea.rest.auth import Caller
from mnemo_sea.rest.threads import PooledRoute
from mnemo_sea.system.errors import TooManyRequests
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder
from mnemo_sea.system.wiring.settings import MnemoSettings

# A bound on a test that would otherwise hang if admission deadlocked; no assertion reads a clock.
HANG_GUARD_S = 120


def run(main: Callable[[], Awaitable[None]]) -> None:
    async def guarded() -> None:
        with anyio.fail_after(HANG_GUARD_S):
            await main()

    anyio.run(guarded)


# ---- the controller alone -------------------------------------------------------------------------


class Work:
    """Requests of the test, each holding a slot until released."""

    def __init__(self, admission: TenantAdmission) -> None:
        self.admission = admission
        self.entered: list[str] = []
        self.refused: list[TooManyRequests] = []
        self.releases: dict[str, anyio.Event] = {}

    async def request(self, tenant: str, name: str) -> None:
        release = self.releases.setdefault(name, anyio.Event())
        try:
            async with self.admission.slot(tenant):
                self.entered.append(name)
                await release.wait()
        except TooManyRequests as e:
            self.refused.append(e)

    def release(self, *names: str) -> None:
        for name in names:
            self.releases.setdefault(name, anyio.Event()).set()


def test_a_tenant_at_its_share_and_queue_is_refused_while_another_tenant_runs() -> None:
    async def main() -> None:
        admission = TenantAdmission(slots=4, per_tenant=2, queue=2)
        work = Work(admission)
        async with anyio.create_task_group() as tg:
            for i in range(5):  # a flood: two run, two wait, the fifth is refused
                tg.start_soon(work.request, "a", f"a{i}")
            await anyio.wait_all_tasks_blocked()
            assert admission.load("a") == TenantLoad(running=2, waiting=2)
            assert work.entered == ["a0", "a1"]
            (refused,) = work.refused
            assert refused.code == "too_many_requests" and refused.retry_after >= 1
            assert refused.detail["running"] == 2 and refused.detail["waiting"] == 2

            work.release("b0")  # another tenant's quick request: admitted at once, and done
            await work.request("b", "b0")
            assert "b0" in work.entered
            assert admission.load("a") == TenantLoad(running=2, waiting=2)  # a's still held

            work.release("a0", "a1", "a2", "a3")
        assert work.entered == ["a0", "a1", "b0", "a2", "a3"]
        assert admission.running == 0 and admission.load("a") == TenantLoad(0, 0)

    run(main)


def test_waiting_tenants_are_served_round_robin_so_a_backlog_never_sits_in_front() -> None:
    async def main() -> None:
        admission = TenantAdmission(slots=1, per_tenant=1, queue=10)
        work = Work(admission)
        async with anyio.create_task_group() as tg:
            tg.start_soon(work.request, "a", "a0")
            await anyio.wait_all_tasks_blocked()
            for i in range(1, 5):  # a's backlog, before anyone else asks
                tg.start_soon(work.request, "a", f"a{i}")
                await anyio.wait_all_tasks_blocked()
            tg.start_soon(work.request, "b", "b0")
            tg.start_soon(work.request, "c", "c0")
            await anyio.wait_all_tasks_blocked()
            assert admission.load("a") == TenantLoad(running=1, waiting=4)
            work.release(*(f"a{i}" for i in range(5)), "b0", "c0")
        # One of a's backlog at most before each other tenant's request, not all four.
        assert work.entered == ["a0", "a1", "b0", "c0", "a2", "a3", "a4"]

    run(main)


def test_a_request_cancelled_while_it_waits_leaves_the_line() -> None:
    async def main() -> None:
        admission = TenantAdmission(slots=1, per_tenant=1, queue=1)
        work = Work(admission)
        async with anyio.create_task_group() as tg:
            tg.start_soon(work.request, "a", "a0")
            await anyio.wait_all_tasks_blocked()
            async with anyio.create_task_group() as gone:  # a client that went away
                gone.start_soon(work.request, "a", "a1")
                await anyio.wait_all_tasks_blocked()
                assert admission.load("a") == TenantLoad(running=1, waiting=1)
                gone.cancel_scope.cancel()
            assert admission.load("a") == TenantLoad(running=1, waiting=0)
            tg.start_soon(work.request, "a", "a2")  # its place in the line is free again
            await anyio.wait_all_tasks_blocked()
            assert work.refused == []
            work.release("a0", "a2")
        assert work.entered == ["a0", "a2"] and admission.running == 0

    run(main)


def test_retry_after_is_the_tenants_backlog_over_its_share_times_its_mean_hold() -> None:
    now = [0.0]

    async def main() -> None:
        admission = TenantAdmission(slots=2, per_tenant=2, queue=2, clock=lambda: now[0])
        work = Work(admission)
        async with anyio.create_task_group() as tg:
            tg.start_soon(work.request, "a", "slow")
            await anyio.wait_all_tasks_blocked()
            now[0] += 11.0  # it held its slot 11 s: the mean goes from 1 s to 1 + 0.2 x 10 = 3 s
            work.release("slow")
            await anyio.wait_all_tasks_blocked()
            for i in range(5):  # two running, two waiting: a backlog of 4 over a share of 2
                tg.start_soon(work.request, "a", f"a{i}")
            await anyio.wait_all_tasks_blocked()
            assert [e.retry_after for e in work.refused] == [6]  # 4 / 2 x 3 s
            work.release(*(f"a{i}" for i in range(5)))

    run(main)


async def charged(admission: TenantAdmission, tenant: str, cpu_s: float) -> None:
    """One request of `tenant` whose work took `cpu_s` CPU seconds."""
    async with admission.slot(tenant) as turn:
        turn.cpu_s = cpu_s


def test_a_tenant_over_its_part_of_the_cpu_runs_one_request_at_a_time_while_another_is_there() -> None:
    """The 1-client repro: a flood's two threads took two thirds of the one core, and a light
    tenant's search p99 grew 11x. Threads were free; the heavy tenant must still wait."""
    now = [0.0]

    async def main() -> None:
        admission = TenantAdmission(slots=4, per_tenant=2, queue=4, clock=lambda: now[0])
        await charged(admission, "heavy", 0.5)
        await charged(admission, "light", 0.01)
        work = Work(admission)
        async with anyio.create_task_group() as tg:
            for name in ("h0", "h1"):
                tg.start_soon(work.request, "heavy", name)
            await anyio.wait_all_tasks_blocked()
            # Two of the four threads are free, yet the heavy tenant runs one request.
            assert admission.load("heavy") == TenantLoad(running=1, waiting=1)
            for name in ("l0", "l1"):  # the light tenant runs up to its share of two
                tg.start_soon(work.request, "light", name)
            await anyio.wait_all_tasks_blocked()
            assert admission.load("light") == TenantLoad(running=2, waiting=0)
            assert work.entered == ["h0", "l0", "l1"]
            work.release("h0")  # its own request ended: the next one takes its place
            await anyio.wait_all_tasks_blocked()
            assert work.entered == ["h0", "l0", "l1", "h1"]
            assert admission.load("heavy") == TenantLoad(running=1, waiting=0)
            work.release("h1", "l0", "l1")
        assert admission.running == 0

    run(main)


def test_alone_a_heavy_tenant_runs_up_to_its_share_and_its_cpu_halves_every_half_life() -> None:
    now = [0.0]

    async def main() -> None:
        admission = TenantAdmission(
            slots=4, per_tenant=2, queue=4, clock=lambda: now[0], half_life_s=1.0, present_s=2.0
        )
        await charged(admission, "heavy", 0.5)
        await charged(admission, "light", 0.01)
        now[0] += 1.0
        assert admission.recent_cpu_s("heavy") == pytest.approx(0.25)
        now[0] += 1.5  # the light tenant was last seen 2.5 s ago: gone
        work = Work(admission)
        async with anyio.create_task_group() as tg:
            for name in ("h0", "h1", "h2"):
                tg.start_soon(work.request, "heavy", name)
            await anyio.wait_all_tasks_blocked()
            assert admission.load("heavy") == TenantLoad(running=2, waiting=1)
            assert admission.recent_cpu_s("light") == 0.0
            work.release("h0", "h1", "h2")

    run(main)


def test_the_waiting_of_a_heavy_tenant_run_once_the_others_are_gone_without_a_release() -> None:
    """Whether a tenant may run more changes with time (the others leave), not only when a slot
    frees: a new request, or the waiters' own look now and then, lets the waiting run."""
    now = [0.0]

    async def main() -> None:
        admission = TenantAdmission(slots=4, per_tenant=2, queue=4, clock=lambda: now[0], present_s=0.05)
        await charged(admission, "heavy", 0.5)
        await charged(admission, "light", 0.01)
        work = Work(admission)
        entered = anyio.Event()
        async with anyio.create_task_group() as tg:
            for name in ("h0", "h1"):
                tg.start_soon(work.request, "heavy", name)
            await anyio.wait_all_tasks_blocked()
            assert admission.load("heavy") == TenantLoad(running=1, waiting=1)
            now[0] += 60.0  # the light tenant is long gone; h0 still runs, nothing was released

            async def watch() -> None:
                while "h1" not in work.entered:
                    await anyio.sleep(0.01)
                entered.set()

            tg.start_soon(watch)
            await entered.wait()  # the waiter's own look granted it (the hang guard bounds this)
            assert admission.load("heavy") == TenantLoad(running=2, waiting=0)
            work.release("h0", "h1")

            # The same with a new request as the trigger: it lets the waiting one go first.
            await charged(admission, "light", 0.0)
            await charged(admission, "heavy", 5.0)
            for name in ("h2", "h3"):
                tg.start_soon(work.request, "heavy", name)
            await anyio.wait_all_tasks_blocked()
            now[0] += 60.0
            tg.start_soon(work.request, "heavy", "h4")
            await anyio.wait_all_tasks_blocked()
            assert work.entered[-2:] == ["h2", "h3"]  # the one that waited, not the newcomer
            assert admission.load("heavy") == TenantLoad(running=2, waiting=1)
            work.release("h2", "h3", "h4")

    run(main)


def test_a_heavy_tenants_retry_after_counts_one_request_at_a_time() -> None:
    now = [0.0]

    async def main() -> None:
        admission = TenantAdmission(slots=4, per_tenant=2, queue=1, clock=lambda: now[0])
        await charged(admission, "heavy", 0.5)
        await charged(admission, "light", 0.01)
        work = Work(admission)
        async with anyio.create_task_group() as tg:
            for name in ("h0", "h1", "h2"):  # one runs, one waits, the third is refused
                tg.start_soon(work.request, "heavy", name)
            await anyio.wait_all_tasks_blocked()
            # A backlog of 2 drained one at a time, each holding the first guess of 1 s.
            assert [e.retry_after for e in work.refused] == [2]
            work.release("h0", "h1", "h2")

    run(main)


def test_a_tenant_under_its_part_of_the_cpu_is_not_held_back_by_the_others_presence() -> None:
    now = [0.0]

    async def main() -> None:
        admission = TenantAdmission(slots=4, per_tenant=2, queue=4, clock=lambda: now[0])
        await charged(admission, "a", 0.2)
        await charged(admission, "b", 0.2)  # equal parts: each may run its share
        work = Work(admission)
        async with anyio.create_task_group() as tg:
            for tenant in ("a", "b"):
                for i in range(2):
                    tg.start_soon(work.request, tenant, f"{tenant}{i}")
            await anyio.wait_all_tasks_blocked()
            assert admission.load("a") == admission.load("b") == TenantLoad(running=2, waiting=0)
            work.release("a0", "a1", "b0", "b1")

    run(main)


def test_the_share_is_at_most_the_pool_and_the_settings_default_to_half_of_it() -> None:
    assert TenantAdmission(slots=2, per_tenant=8, queue=0).per_tenant == 2
    assert MnemoSettings().tenant_threads == 2
    assert MnemoSettings(api_threads=1).tenant_threads == 1
    assert MnemoSettings(api_threads=8, api_tenant_threads=6).tenant_threads == 6
    assert MnemoSettings(api_threads=2, api_tenant_threads=6).tenant_threads == 2
    with pytest.raises(ValueError):
        MnemoSettings(api_tenant_queue=-1)


# ---- through the app --------------------------------------------------------------------------------


class HeldWork:
    """A pooled endpoint whose work blocks, per tenant, until the test releases it."""

    def __init__(self) -> None:
        self.released: dict[str, threading.Event] = {}
        self.done: list[str] = []
        self.all_released = False

    def gate(self, tenant: str) -> threading.Event:
        event = self.released.setdefault(tenant, threading.Event())
        if self.all_released:  # a request admitted after a failed assertion must not hang the test
            event.set()
        return event

    def router(self) -> APIRouter:
        router = APIRouter(route_class=PooledRoute)

        @router.post("/v1/held-work")
        def held(principal: Caller) -> dict[str, str]:  # plain: run in the pool, as the API's are
            self.gate(principal.tenant_id).wait()
            self.done.append(principal.tenant_id)
            return {"tenant": principal.tenant_id}

        return router

    def release_all(self) -> None:
        self.all_released = True
        for event in self.released.values():
            event.set()


@pytest.fixture
def flooded(tmp_path: Path) -> Iterator[tuple[FastAPI, HeldWork, dict[str, str]]]:
    """The app over the embedded default, with the held endpoint and a key of each of three
    tenants, each verified once: with the key cache's clock stopped, a request is authenticated
    on the event loop, so once every task is blocked each request is where admission put it."""
    mnemo = Mnemo.open(tmp_path / "data", embedder=HashingEmbedder())
    settings = MnemoSettings(data_dir=tmp_path / "data", api_threads=4, api_tenant_queue=1)
    app = create_app(mnemo, settings)
    app.state.verified_keys = VerifiedKeys(60, clock=lambda: 0.0)
    work = HeldWork()
    app.include_router(work.router())
    keys = {
        tenant: create_key(mnemo.archive.store, tenant_id=tenant, subject="agent-1", roles=["agent"])[0]
        for tenant in ("flood", "other", "third")
    }

    async def verify() -> None:
        async with _client(app) as http:
            for key in keys.values():
                ready = await http.get("/v1/health/ready", headers={"Authorization": f"Bearer {key}"})
                assert ready.status_code == 200, ready.text

    try:
        run(verify)
        yield app, work, keys
    finally:
        work.release_all()
        mnemo.close()


def _client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")


def test_a_flooding_tenant_gets_429_while_another_tenants_search_is_answered(
    flooded: tuple[FastAPI, HeldWork, dict[str, str]],
) -> None:
    app, work, keys = flooded
    flood = {"Authorization": f"Bearer {keys['flood']}"}
    other = {"Authorization": f"Bearer {keys['other']}"}
    answers: list[httpx.Response] = []

    async def main() -> None:
        async with _client(app) as http, anyio.create_task_group() as tg:

            async def send() -> None:
                answers.append(await http.post("/v1/held-work", headers=flood))

            try:
                for _ in range(4):  # its share of the 4 threads is 2, one more may wait, the 4th...
                    tg.start_soon(send)
                await anyio.wait_all_tasks_blocked()
                assert app.state.admission.load("flood") == TenantLoad(running=2, waiting=1)
                (refused,) = answers
                assert refused.status_code == 429
                assert refused.headers["content-type"] == "application/problem+json"
                body = refused.json()
                assert body["code"] == "too_many_requests" and body["request_id"]
                assert refused.headers["retry-after"] == str(body["retry_after"])
                assert int(refused.headers["retry-after"]) >= 1

                # Another tenant's real search: answered while the flood's requests are all held.
                found = await http.post("/v1/search", json={"query": "refund policy"}, headers=other)
                assert found.status_code == 200, found.text
                assert app.state.admission.load("flood") == TenantLoad(running=2, waiting=1)
                assert work.done == []

                work.gate("flood").set()
            finally:  # a failed assertion must not leave the pool's threads blocked
                work.release_all()
        assert sorted(a.status_code for a in answers) == [200, 200, 200, 429]
        assert work.done == ["flood"] * 3

    run(main)


def test_readiness_answers_while_the_tenants_hold_every_thread_of_the_pool(
    flooded: tuple[FastAPI, HeldWork, dict[str, str]],
) -> None:
    app, work, keys = flooded
    answers: dict[str, list[int]] = {"flood": [], "third": [], "other": []}
    flood_answered = anyio.Event()

    async def main() -> None:
        async with _client(app) as http, anyio.create_task_group() as tg:

            async def send(tenant: str) -> None:
                headers = {"Authorization": f"Bearer {keys[tenant]}"}
                answers[tenant].append((await http.post("/v1/held-work", headers=headers)).status_code)
                if len(answers["flood"]) == 2:
                    flood_answered.set()

            try:
                for tenant in ("flood", "flood", "third", "third"):  # two shares: the whole pool
                    tg.start_soon(send, tenant)
                await anyio.wait_all_tasks_blocked()
                assert app.state.admission.running == 4
                tg.start_soon(send, "other")  # a third tenant's request waits for a thread now
                await anyio.wait_all_tasks_blocked()
                assert app.state.admission.load("other") == TenantLoad(running=0, waiting=1)

                # The flooding tenant's probe with a key not verified yet: a key-table read.
                mnemo: Mnemo = app.state.mnemo
                store = mnemo.archive.store
                fresh, _ = create_key(store, tenant_id="flood", subject="probe", roles=["agent"])
                ready = await http.get("/v1/health/ready", headers={"Authorization": f"Bearer {fresh}"})
                assert ready.status_code == 200 and ready.json()["status"] == "ready", ready.text
                assert (await http.get("/v1/health/live")).status_code == 200
                assert app.state.admission.running == 4 and work.done == []

                work.gate("flood").set()
                await flood_answered.wait()
                assert answers == {"flood": [200, 200], "third": [], "other": []}
                assert app.state.admission.load("other") == TenantLoad(running=1, waiting=0)
                work.release_all()
            finally:  # a failed assertion must not leave the pool's threads blocked
                work.release_all()
        assert answers == {"flood": [200, 200], "third": [200, 200], "other": [200]}

    run(main)


def test_a_pooled_endpoint_charges_the_cpu_of_its_thread_to_the_callers_tenant(
    flooded: tuple[FastAPI, HeldWork, dict[str, str]],
) -> None:
    app, work, keys = flooded
    work.release_all()
    work.gate("other").set()

    async def main() -> None:
        async with _client(app) as http:
            for _ in range(3):
                answer = await http.post(
                    "/v1/search",
                    json={"query": "refund policy"},
                    headers={"Authorization": f"Bearer {keys['other']}"},
                )
                assert answer.status_code == 200, answer.text

    assert app.state.admission.recent_cpu_s("other") == 0.0
    run(main)
    assert app.state.admission.recent_cpu_s("other") > 0.0
    assert app.state.admission.recent_cpu_s("flood") == 0.0


def test_the_request_pooled_endpoints_take_for_admission_is_no_parameter_of_the_api(
    flooded: tuple[FastAPI, HeldWork, dict[str, str]],
) -> None:
    app, _, _ = flooded
    paths: dict[str, Any] = app.openapi()["paths"]
    named = {p["name"] for item in paths.values() for op in item.values() for p in op.get("parameters", ())}
    assert "pooled_request" not in named and "request" not in named
    assert "requestBody" in paths["/v1/search"]["post"]


def test_readiness_with_a_verified_key_never_waits_behind_a_flood_of_unknown_keys(
    flooded: tuple[FastAPI, HeldWork, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys not verified lately are read from the key table on threads of their own; while a
    flood of them holds every one of those threads, a probe whose key was verified is answered."""
    app, _, keys = flooded
    mnemo: Mnemo = app.state.mnemo
    unverified = [
        create_key(mnemo.archive.store, tenant_id="flood", subject=f"bot-{i}", roles=["agent"])[0]
        for i in range(4)
    ]
    lookups_held = threading.Event()
    lane_full = threading.Event()
    started: list[str] = []
    real = Archive.authenticate

    def held_lookup(archive: Archive, presented: str, **kw: Any) -> Any:
        started.append(presented)
        if len(started) == app.state.key_lane.total_tokens:
            lane_full.set()
        lookups_held.wait(HANG_GUARD_S)  # bounds a hang only: released below
        return real(archive, presented, **kw)

    monkeypatch.setattr(Archive, "authenticate", held_lookup)
    answers: list[int] = []

    async def main() -> None:
        async with _client(app) as http, anyio.create_task_group() as tg:

            async def unknown(key: str) -> None:
                headers = {"Authorization": f"Bearer {key}"}
                answers.append((await http.get("/v1/health/ready", headers=headers)).status_code)

            try:
                for key in unverified:  # more than the lane's threads: two run, two wait for one
                    tg.start_soon(unknown, key)
                assert await anyio.to_thread.run_sync(lane_full.wait, HANG_GUARD_S)
                await anyio.wait_all_tasks_blocked()
                assert len(started) == app.state.key_lane.total_tokens == 2
                ready = await http.get(
                    "/v1/health/ready", headers={"Authorization": f"Bearer {keys['other']}"}
                )
                assert ready.status_code == 200 and ready.json()["status"] == "ready", ready.text
                assert answers == []  # the flood's lookups are still held
            finally:
                lookups_held.set()
        assert answers == [200] * 4

    run(main)
