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
import json
import os
import shutil
import subprocess
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


class Browser:
    """A headless Chromium at ``binary``, its profile in ``profile``; ``close()`` ends it."""

    def __init__(self, binary: str, profile: Path, *flags: str) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def child_fds() -> None:
            # The protocol's descriptors must be 3 (commands in) and 4 (answers out) in the
            # browser; copied out of the way first, in case a pipe already sits on 3 or 4.
            commands, answers = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(commands, 3)
            os.dup2(answers, 4)

        cmd = [binary, "--headless", "--remote-debugging-pipe", f"--user-data-dir={profile}", *flags, "about:blank"]
        self.process = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=child_fds,
            pass_fds=(3, 4),  # kept open when the others close, after child_fds
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.send("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise BrowserError("no answer from Chromium in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError(f"Chromium closed the pipe (exit {self.process.poll()})")
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
