"""Build the MCP server over the tools and run it on stdio or streamable HTTP."""

from __future__ import annotations

import ipaddress
import sys
from typing import Any

from traceinsight.errors import UsageError
from traceinsight.mcp.roots import Roots
from traceinsight.mcp.shape import Shaper
from traceinsight.mcp.store import Store
from traceinsight.version import __version__

MISSING_SDK = "traceinsight mcp needs the Model Context Protocol SDK: pip install 'traceinsight[mcp]' (or pip install 'mcp>=2.3')"


def build(
    roots: Roots, *, max_bytes: int, max_chars: int, cache: bool = False, jobs: int | None = None, verbose: bool = False
) -> tuple[Any, Store]:
    """The MCPServer with every tool registered, and the store it reads."""
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:
        raise UsageError(MISSING_SDK) from None
    from traceinsight.mcp.tools import INSTRUCTIONS, register

    app = MCPServer(
        "traceinsight", title="traceinsight", version=__version__, instructions=INSTRUCTIONS,
        log_level="DEBUG" if verbose else "WARNING", warn_on_duplicate_resources=False,
    )  # fmt: skip
    store = Store(roots, max_bytes=max_bytes, cache=cache, jobs=jobs)
    register(app, store, Shaper(max_chars), verbose=verbose)
    return app, store


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (loopback) or ``PORT``; IPv6 hosts in brackets."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--http {text}: give HOST:PORT, e.g. 127.0.0.1:8765")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(app: Any, *, http: tuple[str, int] | None) -> None:
    """Run until the client goes away (stdio) or the process is stopped (HTTP)."""
    if http is None:
        app.run("stdio")
        return
    host, port = http
    if not is_loopback(host):
        print(f"warning: serving on {host}:{port}, reachable from other machines; the server has no authentication", file=sys.stderr)
    print(f"traceinsight mcp: streamable HTTP on http://{host}:{port}/mcp", file=sys.stderr, flush=True)
    app.run("streamable-http", host=host, port=port)
