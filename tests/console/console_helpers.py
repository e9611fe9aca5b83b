"""Helpers of the console's tests: one test's tenant with keys, pages fetched as a key, and the
browser's steps (sign in, follow a link, keep a screenshot)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from mnemo_sea.archive import Principal, Role
from mnemo_sea.system.mnemo import Mnemo

# Where the browser tests leave a screenshot of each page they load (looked at by people, one of
# them shown in the README): build/ is the project's output folder, ignored by git.
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "console-screenshots"


@dataclass
class Console:
    """The REST app with the console mounted under /ui, over one opened system."""

    mode: str
    mnemo: Mnemo
    app: FastAPI
    client: TestClient


@dataclass
class Tenant:
    """One test's tenant: principals and keys minted on demand."""

    console: Console
    tenant_id: str = field(default_factory=lambda: f"t-{uuid.uuid4().hex[:12]}")

    @property
    def mnemo(self) -> Mnemo:
        return self.console.mnemo

    def principal(
        self, subject: str = "alice", role: str = "admin", clearance: str = "internal"
    ) -> Principal:
        return Principal(self.tenant_id, subject, frozenset({Role(role)}), clearance)  # type: ignore[arg-type]

    def key(self, subject: str = "alice", role: str = "admin", clearance: str = "internal") -> str:
        key, _ = self.mnemo.archive.create_key(
            tenant_id=self.tenant_id, subject=subject, roles=[role], clearance=clearance
        )
        return key

    def stored(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row the store holds for this tenant, table by table, read from the tables
        themselves (not through the API): what a read-only page must leave exactly as it was.
        The index's work is settled first: its group commit marks outbox rows done on a timer of
        its own, which a busy machine may fire between two snapshots (no page's doing)."""
        from sqlalchemy import select

        from mnemo_sea.archive.storage import schema

        self.mnemo.sync()
        out: dict[str, list[tuple[Any, ...]]] = {}
        with self.mnemo.archive.store.read() as conn:
            for table in schema.metadata.sorted_tables:
                if "tenant_id" in table.c:
                    rows = conn.execute(select(table).where(table.c.tenant_id == self.tenant_id))
                    out[table.name] = sorted((tuple(r) for r in rows), key=repr)
        return out

    def get(self, path: str, key: str, **kwargs: Any) -> Any:
        """A console page fetched as `key` (sent as REST takes it; the browser tests send the
        cookie the sign-in form sets)."""
        return self.console.client.get(path, headers={"X-API-Key": key}, **kwargs)


# How long a page may take to arrive before the step fails: a bound on a hang, never a measure
# of speed (a busy machine takes what it takes far below it).
PAGE_WAIT_SECONDS = 120


def sign_in(browser: Any, base_url: str, key: str) -> None:
    """Sign in through the form, as a person does."""
    from selenium.webdriver.common.by import By

    browser.get(f"{base_url}/ui/login")
    browser.delete_all_cookies()
    browser.find_element(By.ID, "key").send_keys(key)
    click_through(browser, By.ID, "sign-in")


def click_through(browser: Any, by: str, value: str) -> None:
    """Click the element and wait until the page it leads to has loaded."""
    from selenium.webdriver.common.by import By

    old = browser.find_element(By.TAG_NAME, "html")
    browser.find_element(by, value).click()
    _arrived(browser, old)


def change_through(browser: Any, field: Any, value: object) -> None:
    """Set a field's value by script and fire its `change`, as dragging a slider ends, then wait
    until the page its form sends has loaded (console.js submits a data-autosubmit field)."""
    from selenium.webdriver.common.by import By

    old = browser.find_element(By.TAG_NAME, "html")
    browser.execute_script(
        "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('change'));",
        field,
        str(value),
    )
    _arrived(browser, old)


def _arrived(browser: Any, old: Any) -> None:
    """Wait until the page that replaces `old` (the document element before the step) has loaded.
    While the old page unloads, the driver may answer a script with an error of its own ("document
    unloaded", a stale reference): those mean "not yet" and are asked again."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, PAGE_WAIT_SECONDS, ignored_exceptions=(WebDriverException,))
    wait.until(expected_conditions.staleness_of(old))
    wait.until(lambda b: b.execute_script("return document.readyState") == "complete")


def screenshot(browser: Any, folder: Path, name: str) -> Path:
    """Keep what the browser shows now as `folder/name.png` (the whole page's height)."""
    height = browser.execute_script("return document.documentElement.scrollHeight")
    # The window's size counts the browser's own frame too (about 140 px headless): add it, or
    # the page's foot is cut off.
    frame = browser.execute_script("return window.outerHeight - window.innerHeight")
    browser.set_window_size(1280, max(900, min(int(height) + int(frame), 4000)))
    path = folder / f"{name}.png"
    browser.save_screenshot(str(path))
    browser.set_window_size(1280, 900)
    return path
