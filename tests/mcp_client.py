"""Drive ``traceinsight mcp`` as an assistant does: the server in a subprocess, the MCP SDK's
own client over stdio or streamable HTTP, called from synchronous tests through an anyio
portal (one session per test module)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# A call that takes longer is a hang: the largest answer in these tests takes ~10 s.
CALL_TIMEOUT_S = 120


def require_sdk() -> None:
    """The SDK is the ``mcp`` extra: skipped without it, except in CI where it must be there."""
    if os.environ.get("CI"):
        import mcp  # noqa: F401
    else:
        pytest.importorskip("mcp")


def server_args(*extra: str) -> list[str]:
    return ["-m", "traceinsight", "mcp", *extra]


def server_env() -> dict[str, str]:
    return {"PYTHONPATH": str(ROOT), "TRACEINSIGHT_CACHE_DIR": os.environ.get("TRACEINSIGHT_CACHE_DIR", "")}


class Session:
    """Synchronous calls on a connected ``mcp.Client``."""

    def __init__(self, portal: Any, client: Any, url: str | None = None) -> None:
        self.portal = portal
        self.client = client
        self.url = url  # the endpoint, over HTTP

    def raw(self, tool: str, arguments: dict[str, Any], progress: Any = None) -> Any:
        return self.portal.call(lambda: self.client.call_tool(tool, arguments, progress_callback=progress))

    def call(self, tool: str, /, **arguments: Any) -> dict[str, Any]:
        """The structured answer of a call that must succeed."""
        result = self.raw(tool, arguments)
        text = result.content[0].text if result.content else ""
        assert not result.is_error, f"{tool}({arguments}) failed: {text}"
        assert result.structured_content is not None
        assert json.loads(text) == result.structured_content  # the text block says the same
        return dict(result.structured_content)

    def error(self, tool: str, /, **arguments: Any) -> str:
        """The one-line message of a call that must fail cleanly."""
        result = self.raw(tool, arguments)
        assert result.is_error, f"{tool}({arguments}) should have failed"
        text = str(result.content[0].text)
        # One line; a rejected argument gets pydantic's few lines naming it.
        assert "Traceback" not in text and len(text.splitlines()) <= 5, text
        return text

    def whole(self, answer: dict[str, Any]) -> dict[str, Any]:
        """An answer over the size cap, joined from its parts through ``more``."""
        parts = [answer["text"]]
        while answer.get("continuation"):
            answer = self.call("more", continuation=answer["continuation"])
            parts.append(answer["text"])
        return dict(json.loads("".join(parts)))

    def list_tools(self) -> Any:
        return self.portal.call(self.client.list_tools)

    def read(self, uri: str) -> Any:
        return self.portal.call(self.client.read_resource, uri)

    def prompt(self, name: str, arguments: dict[str, str]) -> Any:
        return self.portal.call(self.client.get_prompt, name, arguments)


@contextmanager
def connected(target: Any) -> Iterator[Session]:
    from anyio.from_thread import start_blocking_portal
    from mcp import Client

    with start_blocking_portal() as portal, portal.wrap_async_context_manager(
        Client(target, read_timeout_seconds=CALL_TIMEOUT_S)
    ) as client:
        yield Session(portal, client, target if isinstance(target, str) else None)


@contextmanager
def stdio_session(*extra: str) -> Iterator[Session]:
    from mcp import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=server_args(*extra), env=server_env(), cwd=str(ROOT))
    with connected(params) as session:
        yield session


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_session(*extra: str, start_timeout_s: float = 60.0) -> Iterator[Session]:
    """A server on 127.0.0.1 at a free port, stopped (by its pid) when the session ends."""
    port = free_port()
    env = {**os.environ, **server_env()}
    # A file, not a pipe: a full pipe would stall the server.
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [sys.executable, *server_args("--http", f"127.0.0.1:{port}", *extra)],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
        )
        try:
            deadline = time.monotonic() + start_timeout_s
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    raise AssertionError(f"server exited: {log.read().decode(errors='replace')}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise AssertionError(f"server did not listen on port {port} in {start_timeout_s} s") from None
                    time.sleep(0.2)
            with connected(f"http://127.0.0.1:{port}/mcp") as session:
                yield session
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
