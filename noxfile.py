"""Developer tasks: ``nox`` runs lint, type checks and the test suite in fresh virtualenvs."""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["lint", "typecheck", "tests", "ray"]
nox.options.reuse_existing_virtualenvs = False

# The capture tests need torch; the CPU build is enough (set TRACEINSIGHT_TORCH_SPEC to
# e.g. "torch" to take whatever your index serves).
TORCH_SPEC = os.environ.get("TRACEINSIGHT_TORCH_SPEC", "torch==2.13.0")
LINT_PATHS = ["traceinsight", "tests", "benchmarks", "sample_traces", "docs", "noxfile.py"]


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (CPU only; GPU tests are skipped without CUDA), one worker per core.

    Files go to workers whole (``--dist loadfile``): a file's tests share the traces they load.
    ``nox -s tests -- tests/unit`` runs one folder (``unit``: hand-made traces; ``integration``:
    recorded traces; ``processes``: tests that start processes), ``-- tests/unit/test_x.py``
    some files; ``-- -n 0`` runs in one process."""
    session.install("-e", ".[dev,docs,mcp]", TORCH_SPEC, "nvidia-ml-py")
    session.run("python", "-m", "pytest", "-n", "auto", "--dist", "loadfile", *session.posargs)


@nox.session
def ray(session: nox.Session) -> None:
    """The Ray engine on a local Ray (the ``ray`` extra): the same results as the process pool."""
    session.install("-e", ".[dev,ray]")
    # Here a missing Ray is a failure, not a skip.
    session.env["TRACEINSIGHT_REQUIRE_RAY"] = "1"
    session.run("python", "-m", "pytest", "tests/processes/test_engine.py", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, and the import layering contracts in pyproject.toml (``lint-imports``)."""
    session.install("ruff", "import-linter")
    session.run("ruff", "check", *LINT_PATHS)
    # lint-imports finds the package from the working directory; it need not be installed.
    session.run("lint-imports")


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".[dev,mcp]")
    session.run("mypy")


@nox.session
def docs(session: nox.Session) -> None:
    """Regenerate the generated docs: the CLI reference, the JSON report schema and the command
    output pasted into the pages (run after changing a command, a section or a result's fields)."""
    session.install("-e", ".[mcp]")
    session.run("python", "docs/gen_cli_reference.py")
    session.run("python", "docs/gen_agents_reference.py")
    session.run("python", "docs/gen_report_schema.py")
    session.run("python", "docs/refresh_outputs.py")


@nox.session
def mutation(session: nox.Session) -> None:
    """Mutation testing (cosmic-ray) of the modules that turn a trace into what users read,
    against the fast hand-made-trace tests; prints the score per module. ``-- idle stats``
    for some modules only, ``-- --list`` for the list, ``-- --help`` for time-boxing. Takes
    hours for all modules on a small machine: not one of the default sessions."""
    session.install("-e", ".[dev]", "cosmic-ray")
    session.run("python", "tests/mutation.py", *session.posargs)
