"""``traceinsight mcp --http``: the same tools over streamable HTTP on 127.0.0.1, with a small
memory cap (entries released and opened again) and a small answer cap (parts joined)."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from mcp_client import ROOT, Session, http_session, require_sdk

import traceinsight as ti

require_sdk()

SAMPLES = ROOT / "sample_traces"


@pytest.fixture(scope="module")
def server() -> Iterator[Session]:
    # 1 MB: each sample trace is over it, so opening a second releases the first.
    with http_session("--root", "sample_traces", "--max-memory-mb", "1", "--max-chars", "3000") as session:
        yield session


def test_tools_over_http(server: Session) -> None:
    names = {t.name for t in server.list_tools().tools}
    assert {"open", "verdict", "section", "sql", "whatif", "memory", "more"} <= names
    opened = server.call("open", path="fix_launch_before.json.gz")
    rows = server.call("sql", source=opened["handle"], query="SELECT COUNT(*) AS n FROM kernels")["rows"]
    assert rows == [{"n": ti.load(SAMPLES / "fix_launch_before.json.gz", cache=False).kernels.height}]
    assert "outside the roots" in server.error("open", path="/etc/hostname")


def test_a_long_answer_comes_in_parts_under_the_cap(server: Session) -> None:
    handle = server.call("open", path="fix_launch_before.json.gz")["handle"]
    first = server.call("verdict", source=handle)
    assert first["data"] is None and first["continuation"]
    whole = server.whole(first)["data"]
    expected = ti.analyze(ti.load(SAMPLES / "fix_launch_before.json.gz", cache=False))
    assert whole["headline"] == expected.headline.to_dict()


def test_past_the_memory_cap_the_oldest_is_released_and_opened_again(server: Session) -> None:
    first = server.call("open", path="fix_launch_before.json.gz")["handle"]
    second = server.call("open", path="fix_launch_after.json.gz")["handle"]
    loaded = server.call("loaded")
    entries = (loaded["data"] or server.whole(loaded)["data"])["entries"]
    assert {e["handle"] for e in entries} == {second}
    again = server.call("sql", source=first, query="SELECT COUNT(*) AS n FROM kernels")
    assert again["handle"] == first and again["rows"][0]["n"] > 0


def test_a_request_naming_another_host_is_refused(server: Session) -> None:
    # DNS rebinding: a page on another site that resolves its name to 127.0.0.1 sends its own
    # Host header; on loopback the server answers only 127.0.0.1, localhost and [::1].
    assert server.url is not None
    request = urllib.request.Request(
        server.url, data=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}', method="POST",
        headers={"Host": "tracedata.example", "Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
    )  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 421 and refused.value.read() == b"Invalid Host header"
