"""``traceinsight mcp`` over stdio, driven by the MCP SDK's client: every tool on a sample
trace, a job folder, a diff pair and an allocator snapshot, each answer checked against the
library's own; and the clean refusals (paths outside the roots, SQL that reads files, bad
SQL, unknown sections, malformed calls) and continuations of long answers."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_client import ROOT, Session, require_sdk, stdio_session

import traceinsight as ti

require_sdk()

SAMPLES = ROOT / "sample_traces"
TRACE = SAMPLES / "train_eager.json.gz"
TOOLS = {"open", "verdict", "section", "sql", "kernels", "diff", "compare", "whatif", "memory", "more", "loaded"}


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder that is not a root, with a trace in it."""
    folder = tmp_path_factory.mktemp("outside")
    shutil.copy(TRACE, folder / "secret.json.gz")
    return folder


@pytest.fixture(scope="module")
def extra_root(tmp_path_factory: pytest.TempPathFactory, outside: Path) -> Path:
    """A second root: a job's rank files in a folder of their own, and a link out of the roots."""
    root = tmp_path_factory.mktemp("root2")
    job = root / "job"
    job.mkdir()
    for rank in range(4):
        shutil.copy(SAMPLES / f"job_balanced.rank{rank}.json.gz", job)
    (root / "escape.json.gz").symlink_to(outside / "secret.json.gz")
    return root


@pytest.fixture(scope="module")
def server(extra_root: Path) -> Iterator[Session]:
    with stdio_session("--root", "sample_traces", "--root", str(extra_root)) as session:
        yield session


@pytest.fixture(scope="module")
def handle(server: Session) -> str:
    return str(server.call("open", path="train_eager.json.gz")["handle"])


@pytest.fixture(scope="module")
def report() -> ti.Report:
    return ti.analyze(ti.load(TRACE, cache=False))


def test_every_tool_and_parameter_is_described(server: Session) -> None:
    tools = server.list_tools().tools
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        assert tool.description and len(tool.description) >= 80, f"{tool.name}: no description an assistant can choose by"
        assert tool.output_schema is not None and "kind" in tool.output_schema["properties"]
        assert tool.annotations is not None and tool.annotations.read_only_hint
        for name, schema in tool.input_schema.get("properties", {}).items():
            assert schema.get("description"), f"{tool.name}.{name} has no description"


def test_open_gives_the_overview_and_a_second_open_reads_what_is_loaded(server: Session, handle: str, report: ti.Report) -> None:
    started = time.perf_counter()
    again = server.call("open", path=str(TRACE))  # absolute, inside the root
    assert time.perf_counter() - started < 2.0
    assert again["handle"] == handle
    data = again["data"]
    assert data["verdict"] == report.headline.verdict
    assert data["overview"] == report.sections["overview"].to_dict()
    assert data["sections"]["findings"] == {"available": True}
    assert data["load_s"] > 0 and data["analyze_s"] > 0


def test_open_tells_its_progress_to_a_client_that_asks(server: Session) -> None:
    heard: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        heard.append(str(message))

    result = server.raw("open", {"path": "fix_bmm_before.json.gz"}, progress=progress)
    assert not result.is_error
    assert heard[0].startswith("reading fix_bmm_before.json.gz (0.7 MiB)")
    assert "analysing: gaps" in heard and heard[-1] == "analysing: findings"


def test_a_file_changed_on_disk_is_read_again(server: Session, extra_root: Path) -> None:
    path = extra_root / "changing.json.gz"
    shutil.copy(SAMPLES / "fix_pinned_before.json.gz", path)
    first = server.call("open", path=str(path))
    shutil.copy(SAMPLES / "fix_pinned_after.json.gz", path)
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))  # a newer mtime, however coarse the clock
    second = server.call("open", path=str(path))
    assert second["handle"] != first["handle"]
    expected = ti.analyze(ti.load(SAMPLES / "fix_pinned_after.json.gz", cache=False)).headline.verdict
    assert second["data"]["verdict"] == expected != first["data"]["verdict"]


def test_verdict_is_the_reports_headline_and_findings(server: Session, handle: str, report: ti.Report) -> None:
    data = server.call("verdict", source=handle)["data"]
    assert data["headline"] == report.headline.to_dict()
    findings = data["findings"]["findings"]
    assert [f["id"] for f in findings] == [f.id for f in report.findings.findings]
    assert all(f["saving_ns"] >= 0 and f["evidence"] is not None for f in findings)
    assert data["window"] == report.sections["window"].to_dict()


def test_section_filters_sorts_and_pages_its_table(server: Session, handle: str, report: ti.Report) -> None:
    regions = report.sections["bound"].to_polars()
    threshold = int(regions["dur_ns"].median())  # type: ignore[arg-type]
    wanted = regions.filter(regions["dur_ns"] > threshold).sort("dur_ns", descending=True)
    assert wanted.height > 6
    asked = {"source": handle, "name": "bound", "where": f"dur_ns > {threshold}", "order_by": "dur_ns", "limit": 3}
    first = server.call("section", **asked)
    assert first["page"] == {"offset": 0, "returned": 3, "total": wanted.height, "next_offset": 3}
    assert [r["dur_ns"] for r in first["rows"]] == wanted["dur_ns"].head(3).to_list()
    second = server.call("section", **{**asked, "offset": 3})
    assert [r["dur_ns"] for r in second["rows"]] == wanted["dur_ns"].slice(3, 3).to_list()
    assert first["data"]["facts"]["available"] is True
    by_alias = server.call("section", source=handle, name="critical path", limit=1)
    assert by_alias["data"]["section"] == "critical_path"


def test_section_refuses_unknown_names_and_bad_filters(server: Session, handle: str) -> None:
    message = server.error("section", source=handle, name="gapz")
    assert "unknown section 'gapz'" in message and "gaps" in message and "critical_path" in message
    assert "no such column" in server.error("section", source=handle, name="gaps", order_by="nope")
    assert "SQL error" in server.error("section", source=handle, name="gaps", where="dur_ns >")
    assert "table functions are refused" in server.error(
        "section", source=handle, name="gaps", where="dur_ns IN (SELECT 1 FROM read_csv('/etc/hostname'))"
    )


def test_sql_answers_as_the_library_does(server: Session, handle: str) -> None:
    query = "SELECT name, SUM(dur_ns) AS ns, COUNT(*) AS n FROM kernels GROUP BY name ORDER BY ns DESC LIMIT 5"
    expected = ti.load(TRACE, cache=False).sql(query).to_dicts()
    answer = server.call("sql", source=handle, query=query)
    assert answer["rows"] == expected
    assert answer["data"]["columns"] == ["name", "ns", "n"]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM read_csv('/etc/hostname')",
        "SELECT * FROM \"read_csv\"('/etc/hostname')",
        "select * from READ_CSV /* a comment */ ('/etc/hostname')",
        "SELECT * FROM kernels, read_parquet('x.parquet')",
        "SELECT * FROM kernels JOIN some_future_reader('x') ON true",
        "WITH t AS (SELECT * FROM read_ipc('x')) SELECT * FROM t",
    ],
)
def test_sql_cannot_read_files(server: Session, handle: str, query: str) -> None:
    assert "table functions are refused" in server.error("sql", source=handle, query=query)


def test_sql_is_one_read_only_statement(server: Session, handle: str) -> None:
    assert "only SELECT" in server.error("sql", source=handle, query="DROP TABLE kernels")
    assert "only SELECT" in server.error("sql", source=handle, query="CREATE TABLE x AS SELECT 1 AS a")
    assert "one statement" in server.error("sql", source=handle, query="SELECT 1 AS a; DROP TABLE kernels")
    message = server.error("sql", source=handle, query="SELECT * FROM kernel")
    assert "SQL error" in message and "kernels" in message
    assert "SQL error" in server.error("sql", source=handle, query="SELECT name FROM kernels WHERE")


def test_a_huge_table_is_paged_under_the_cap(server: Session, handle: str) -> None:
    answer = server.call("sql", source=handle, query="SELECT * FROM events ORDER BY id", limit=1000)
    page = answer["page"]
    assert 0 < page["returned"] < 1000 and page["next_offset"] == page["returned"]
    assert len(json.dumps(answer, separators=(",", ":"))) <= 40_000 and any("cut to" in n for n in answer["notes"])
    following = server.call("sql", source=handle, query="SELECT * FROM events ORDER BY id", limit=2, offset=page["next_offset"])
    assert following["rows"][0]["id"] == answer["rows"][-1]["id"] + 1


def test_kernels_of_a_step_and_of_an_op(server: Session, handle: str) -> None:
    kernels = ti.load(TRACE, cache=False).kernels
    step = int(kernels["step"].max())  # type: ignore[arg-type]
    mine = kernels.filter(kernels["step"] == step)
    answer = server.call("kernels", source=handle, step=step, limit=5)
    assert answer["data"]["kernels"] == mine.height and answer["data"]["device_ns"] == mine["dur_ns"].sum()
    assert answer["page"]["total"] == mine.height and len(answer["rows"]) == 5
    assert [r["ts_ns"] for r in answer["rows"]] == sorted(mine["ts_ns"].to_list())[:5]
    by_op = server.call("kernels", source=handle, op="aten::mm", limit=1)["data"]
    assert 0 < by_op["kernels"] < kernels.height
    assert "name a step, an op" in server.error("kernels", source=handle)


def test_whatif_replays_as_the_library_and_comes_in_parts(server: Session, handle: str) -> None:
    answer = server.call("whatif", source=handle, scale=["gemm=0.5"], remove=["cudaStreamSynchronize"])
    expected = ti.whatif(TRACE, scale=["gemm=0.5"], remove=["cudaStreamSynchronize"], cache=False).to_dict()
    if answer["data"] is None:  # over the cap: joined from its parts
        assert answer["continuation"] and any("over the cap" in n for n in answer["notes"])
        assert server.whole(answer)["data"] == expected
    else:
        assert answer["data"] == expected
    assert "name a change" in server.error("whatif", source=handle)
    assert "bad factor 'fast'" in server.error("whatif", source=handle, scale=["gemm=fast"])
    # a finding's own change, on the step the findings are priced on
    by_finding = server.call("whatif", source=handle, findings=["fp32_no_tensor_cores"])
    data = by_finding["data"] if by_finding["data"] is not None else server.whole(by_finding)["data"]
    assert data["findings"] == ["fp32_no_tensor_cores"]
    assert data == ti.whatif(TRACE, findings=["fp32_no_tensor_cores"], cache=False).to_dict()
    assert "no finding 'launch_bound' in this trace" in server.error("whatif", source=handle, findings=["launch_bound"])


def test_diff_and_compare_of_a_pair(server: Session) -> None:
    before, after = "fix_launch_before.json.gz", "fix_launch_after.json.gz"
    data = server.call("diff", before=before, after=after, top=5)["data"]
    expected = ti.diff(SAMPLES / before, SAMPLES / after, cache=False, top_n=5)
    assert data["verdict"] == expected.verdict
    assert data["step_time"] == json.loads(json.dumps(expected.to_dict()["step_time"]))
    series = server.call("compare", runs=[before, after])["data"]
    assert [Path(r["path"]).name for r in series["runs"]] == [before, after]


def test_a_job_folder(server: Session, extra_root: Path) -> None:
    opened = server.call("open", path=str(extra_root / "job"))
    assert opened["data"]["kind"] == "job" and len(opened["data"]["ranks"]) == 4
    job = ti.analyze(ti.load_job(extra_root / "job", cache=False, engine="serial"))
    verdict = server.call("verdict", source=opened["handle"])["data"]
    assert [f["id"] for f in verdict["findings"]] == [f.id for f in job.findings]
    table = server.call("section", source=opened["handle"], name="rank_table", order_by="rank", descending=False)
    assert [r["rank"] for r in table["rows"]] == [0, 1, 2, 3]
    assert "start the server with --cache" in server.error("sql", source=opened["handle"], query="SELECT COUNT(*) AS n FROM kernels")


def test_an_allocator_snapshot(server: Session) -> None:
    path = SAMPLES / "memory" / "h200" / "oom.pickle"
    opened = server.call("open", path="memory/h200/oom.pickle")
    assert opened["data"]["kind"] == "snapshot"
    expected = ti.analyze_memory_snapshot(path).to_dict()
    oom = server.call("memory", source=opened["handle"], part="oom")["data"]["oom"]
    assert oom == expected["oom"] and oom["request_bytes"] > 0
    other = "memory/h200/leak.pickle"
    compared = server.call("memory", source=opened["handle"], part="compare", compare_with=other)["data"]["compare"]
    assert compared == ti.analyze_memory_snapshot(path, compare_with=SAMPLES / other).to_dict()["compare"]
    assert "needs compare_with" in server.error("memory", source=opened["handle"], part="compare")
    assert "allocator snapshot" in server.error("verdict", source=opened["handle"])


def test_paths_outside_the_roots_are_refused(server: Session, outside: Path, extra_root: Path) -> None:
    for path in (str(outside / "secret.json.gz"), "../README.md", "/etc/hostname", str(extra_root / "escape.json.gz"), str(outside / "*.json.gz")):
        assert "outside the roots" in server.error("open", path=path), path
    assert "outside the roots" in server.error("diff", before=str(outside / "secret.json.gz"), after="fix_launch_after.json.gz")
    assert "no such file" in server.error("open", path="missing.json.gz")
    assert "unknown handle" in server.error("verdict", source="t999")


def test_malformed_calls_get_a_clear_error(server: Session, handle: str) -> None:
    assert "limit" in server.error("sql", source=handle, query="SELECT 1 AS a", limit="many")
    assert "limit must be between" in server.error("sql", source=handle, query="SELECT 1 AS a", limit=0)
    assert "Unknown tool" in server.error("plot", source=handle)
    assert "unknown kind" in server.error("open", path="train_eager.json.gz", kind="video")
    assert "continuation" in server.error("more", continuation="nope")


def test_reports_as_resources_and_the_diagnosis_prompt(server: Session, handle: str, report: ti.Report) -> None:
    document = json.loads(server.read(f"traceinsight://report/{handle}.json").contents[0].text)
    assert document["kind"] == "report" and document["headline"] == report.headline.to_dict()
    markdown = server.read(f"traceinsight://report/{handle}.md").contents[0].text
    assert markdown.lstrip().startswith("#") and "Findings" in markdown
    text = server.prompt("diagnose", {"source": handle}).messages[0].content.text
    assert handle in text and text.index("window") < text.index("verdict") < text.index("whatif")


def test_loaded_lists_the_handles(server: Session, handle: str) -> None:
    data = server.call("loaded")["data"]
    assert handle in {e["handle"] for e in data["entries"]}
    assert 0 < data["memory_bytes"] <= data["memory_cap_bytes"]


def test_the_tool_reference_in_the_docs_is_generated_from_the_server() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_agents_reference", ROOT / "docs" / "gen_agents_reference.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
    assert gen.splice(text, gen.generate()) == text, "stale: run python docs/gen_agents_reference.py (or nox -s docs)"
