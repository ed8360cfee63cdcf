"""One headless Chromium for many pages, driven over the DevTools protocol on a pipe.

Starting Chromium costs a second or two of a small machine's time; a test module that looks at
dozens of pages (each at several widths) starts it once (``Browser``) and opens each page in a
new tab of the wanted size, as ``--window-size`` would size the window. The protocol runs over
``--remote-debugging-pipe`` (messages are JSON, each ended by a NUL byte, on file descriptors 3
and 4 of the browser), so no port is opened and nothing beyond the standard library is needed.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
TIMEOUT_S = 120.0


def chromium() -> str:
    explicit = os.environ.get("TRACEINSIGHT_CHROMIUM")
    if explicit:
        return explicit
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail("Chromium is required in CI for the HTML report test (apt-get install -y chromium)")
    pytest.skip("Chromium not found: install it (Debian: apt-get install -y chromium) or set TRACEINSIGHT_CHROMIUM")


class BrowserError(RuntimeError):
    pass


def _high(fd: int) -> int:
    """``fd`` moved to a descriptor of 10 or above (closed on exec), the original closed."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Browser:
    """A headless Chromium at ``binary``, its profile in ``profile``; ``close()`` ends it."""

    def __init__(self, binary: str, profile: Path, *flags: str) -> None:
        # Our ends and the browser's, all kept off descriptors 3 and 4, which the browser's
        # ends are copied onto in the child (posix_spawn runs no Python there, unlike a
        # preexec_fn, which may hang in a process with threads, as an xdist worker is).
        to_browser_r, self._to_browser = (_high(fd) for fd in os.pipe())
        self._from_browser, from_browser_w = (_high(fd) for fd in os.pipe())
        cmd = [binary, "--headless", "--remote-debugging-pipe", f"--user-data-dir={profile}", *flags, "about:blank"]
        self.pid = os.posix_spawnp(
            binary,
            cmd,
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, to_browser_r, 3),  # commands in
                (os.POSIX_SPAWN_DUP2, from_browser_w, 4),  # answers out
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ],
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self.exit_status: int | None = None

    def _reap(self, timeout_s: float) -> bool:
        """Whether the browser has exited (waited for up to ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while self.exit_status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.exit_status = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                return False
            else:
                time.sleep(0.05)
        return True

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.send("Browser.close")
        if not self._reap(10):
            os.kill(self.pid, signal.SIGKILL)
            self._reap(10)
        os.close(self._to_browser)
        os.close(self._from_browser)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_browser], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise BrowserError("no answer from Chromium in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                self._reap(1)
                raise BrowserError(f"Chromium closed the pipe (exit {self.exit_status})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)  # type: ignore[no-any-return]

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        """Send one command and return its result; events that arrive meanwhile are kept."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})  # type: ignore[no-any-return]
            self._events.append(answer)

    def _wait_event(self, method: str, session: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            for i, event in enumerate(self._events):
                if event.get("method") == method and event.get("sessionId") == session:
                    del self._events[i]
                    return
            self._events.append(self._read_message(deadline))

    def _events_of(self, session: str) -> list[dict[str, Any]]:
        mine = [e for e in self._events if e.get("sessionId") == session]
        self._events = [e for e in self._events if e.get("sessionId") != session]
        return mine


def start(profile: Path) -> Browser:
    """The found Chromium (skips, or in CI fails, without one), headless, profile in ``profile``."""
    return Browser(
        chromium(),
        profile,
        "--no-sandbox",  # CI containers run as root
        "--disable-gpu",
        "--no-first-run",
        "--hide-scrollbars",
    )


class Page:
    """``page`` (a file) loaded in a new tab of ``width`` x ``height``: the same layout as a
    browser started with ``--window-size=width,height`` on it. Its console and log messages
    are in ``console`` (text) once it has loaded."""

    def __init__(self, browser: Browser, page: Path, width: int, height: int) -> None:
        self.browser = browser
        self.target = browser.send("Target.createTarget", {"url": "about:blank", "width": width, "height": height, "newWindow": True})["targetId"]
        self.session = browser.send("Target.attachToTarget", {"targetId": self.target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            browser.send(f"{domain}.enable", session=self.session)
        # A headless window's page is a little shorter than the window; the viewport is made
        # the window's size exactly, as the screenshots of --window-size were.
        browser.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=self.session,
        )
        browser.send("Page.navigate", {"url": page.as_uri()}, session=self.session)
        browser._wait_event("Page.loadEventFired", self.session)
        self.console: list[str] = []

    def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` in the page (a promise is awaited)."""
        answer = self.browser.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}, session=self.session
        )
        if "exceptionDetails" in answer:
            raise BrowserError(f"{expression[:60]}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def dom_when(self, selector: str, timeout_ms: int = 5000) -> str:
        """The page's DOM (as ``--dump-dom`` prints it) once ``selector`` is in it, or after
        ``timeout_ms`` without it (a probe that never ran: the caller's check then fails)."""
        wait = (
            "new Promise(done => { const t0 = Date.now(); (function poll() {"
            f" if (document.querySelector({json.dumps(selector)}) || Date.now() - t0 > {timeout_ms}) done(true);"
            " else setTimeout(poll, 20); })(); })"
        )
        self.evaluate(wait)
        html: str = self.evaluate("document.documentElement.outerHTML")
        self._collect_console()
        return html

    def screenshot(self, out: Path) -> None:
        data = self.browser.send("Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True}, session=self.session)["data"]
        out.write_bytes(base64.b64decode(data))

    def _collect_console(self) -> None:
        for event in self.browser._events_of(self.session):
            params = event.get("params", {})
            if event.get("method") == "Runtime.consoleAPICalled":
                self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif event.get("method") == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                self.console.append(str(details.get("exception", {}).get("description", details.get("text", ""))))
            elif event.get("method") == "Log.entryAdded":
                self.console.append(str(params.get("entry", {}).get("text", "")))

    def close(self) -> None:
        self.browser.send("Target.closeTarget", {"targetId": self.target})

    def __enter__(self) -> Page:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
