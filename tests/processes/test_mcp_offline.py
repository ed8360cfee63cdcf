"""What ``traceinsight mcp`` decides before any client connects, with or without the SDK:
the SQL check (the queries an analyst writes pass; none that reads a file or changes the
tables does), the command line, and the one-line error where the SDK is missing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from traceinsight.errors import UsageError
from traceinsight.mcp.sqlguard import check_query

TABLES = ("events", "kernels", "counters", "memory")


@pytest.mark.parametrize(
    "query",
    [
        "SELECT COUNT(*) AS n FROM kernels",
        "select name, sum(dur_ns) from kernels group by 1 order by 2 desc limit 5;",
        "WITH t AS (SELECT name FROM kernels) SELECT * FROM t JOIN events USING (name)",
        "SELECT * FROM kernels WHERE name IN (SELECT name FROM events WHERE dur_ns > ROUND(3.5))",
        "SELECT 'read_csv(x)' AS s, \"read_csv\" FROM kernels",  # a string and a column, not calls
        "(SELECT 1 AS a)",
        "SELECT k.name FROM kernels AS k JOIN events e ON k.correlation = e.correlation WHERE LOWER(k.name) LIKE '%gemm%'",
    ],
)
def test_analysts_queries_pass(query: str) -> None:
    check_query(query, TABLES)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "table functions are refused"),
        ("SELECT * FROM `read_csv`('/etc/passwd')", "table functions are refused"),
        ("SELECT * FROM read_csv--x\n('/etc/passwd')", "table functions are refused"),
        ("SELECT * FROM kernels k, events e, read_json('x')", "table functions are refused"),
        ("SELECT * FROM kernels LEFT JOIN anything(1) ON true", "table functions are refused"),
        ("SELECT read_parquet('x') AS a FROM kernels", "table functions are refused"),
        ("DROP TABLE kernels", "only SELECT"),
        ("SHOW TABLES", "only SELECT"),
        ("", "only SELECT"),
        ("SELECT 1 AS a; SELECT 2 AS b", "one statement"),
    ],
)
def test_queries_that_reach_files_or_change_tables_are_refused(query: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        check_query(query, TABLES)


def test_without_the_sdk_the_command_says_what_to_install() -> None:
    code = "import sys; sys.modules['mcp'] = None; from traceinsight.cli.app import main; sys.exit(main(['mcp']))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: traceinsight mcp needs the Model Context Protocol SDK: pip install 'traceinsight[mcp]' (or pip install 'mcp>=2.3')"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--http", "localhost"], "give HOST:PORT"),
        (["--http", ":99999"], "give HOST:PORT"),
        (["--root", "no/such/folder"], "not a directory"),
        (["--max-chars", "10"], "--max-chars must be"),
    ],
)
def test_bad_options_are_one_line_usage_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    from traceinsight.cli.app import main

    assert main(["mcp", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
