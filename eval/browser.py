"""A real browser for the console's tests and its benchmark: Debian's headless Chromium driven
through its own chromedriver by Selenium, and an ASGI app served on a free loopback port.

`make setup` installs both Debian packages (chromium, chromium-driver) when they are missing;
their versions always match, and Selenium Manager, which would try to download a driver, is
never asked (the driver's path is given). The flags keep Chromium off the network: this
machine's network is closed, and Chromium's background services would retry at every start.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
INSTALL_HINT = "install them with: apt-get install chromium chromium-driver (make setup does)"
_FLAGS = (
    "--headless=new",
    "--no-sandbox",  # the tests run as root in a container
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--window-size=1280,900",
)


def browser_problem() -> str | None:
    """Why no browser can run here, or None."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if shutil.which(p) is None]
    if missing:
        return f"{' and '.join(missing)} not found: {INSTALL_HINT}"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: pip install -e '.[dev]'"
    return None


@contextlib.contextmanager
def headless_chromium() -> Iterator[WebDriver]:
    """A headless Chromium with an empty profile of its own, quit (and the profile removed) after."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="mnemo-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in _FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@contextlib.contextmanager
def served(app: Any) -> Iterator[str]:
    """`app` served by uvicorn on a free port of 127.0.0.1 in a thread: yields its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        # No sleep: wait on the server's own flag, set once it listens.
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the console's server stopped before it started")
            thread.join(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()
        sock.close()
