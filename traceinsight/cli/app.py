"""The command line: every command's module, the help tidying, and the one top-level error
handler every command goes through."""

from __future__ import annotations

import re
import sys
from typing import Any

import typer

# isort: off
# root first: it sets polars' allocator options before any command module can import polars.
from traceinsight.cli.root import _state, app

# The commands, in the order `--help` lists them (each module registers its command on `app`).
from traceinsight.cli import analyze, gaps, bound, diff, compare
from traceinsight.cli import compile as compile_command
from traceinsight.cli import whatif, memory, export, sql, capture, mcp

# isort: on
from traceinsight.errors import EXIT_USAGE, TraceInsightError


def _cli_exception_types() -> tuple[tuple[type[BaseException], ...], ...]:
    """Exit, abort, usage and generic CLI exception classes of whichever click typer uses.

    Recent typer releases vendor click as ``typer._click``; older ones use ``click``.
    """
    exits: list[type[BaseException]] = [typer.Exit]
    aborts: list[type[BaseException]] = [typer.Abort]
    usage: list[type[BaseException]] = []
    generic: list[type[BaseException]] = []
    for module_name in ("typer._click.exceptions", "click.exceptions"):
        try:
            module = __import__(module_name, fromlist=["ClickException"])
        except ImportError:
            continue
        for attr, bucket in (("Exit", exits), ("Abort", aborts), ("UsageError", usage), ("ClickException", generic)):
            cls = getattr(module, attr, None)
            if isinstance(cls, type) and cls not in bucket:
                bucket.append(cls)
    return tuple(exits), tuple(aborts), tuple(usage), tuple(generic)


_EXITS, _ABORTS, _USAGE_ERRORS, _CLI_ERRORS = _cli_exception_types()

# One module per command, imported above by name so that every edge is a static import.
COMMANDS = (analyze, gaps, bound, diff, compare, compile_command, whatif, memory, export, sql, capture, mcp)


def _plain_help(cmd: Any, *, sections: bool) -> None:
    """Help that reads as the usage line promises: flags show no ``<bool>`` type, arguments
    their upper-case name (``TRACE``), and ``--only``/``--skip`` the registered section names."""
    for sub in getattr(cmd, "commands", {}).values():
        _plain_help(sub, sections=sections)
    if cmd.help:
        cmd.help = reflow(cmd.help)
    for param in cmd.params:
        if param.param_type_name == "argument":
            if param.metavar is None:
                param.metavar = param.name.upper()
            many = param.nargs != 1 and not param.metavar.endswith("...")
            upper = param.metavar + ("..." if many else "")
            param._usage_display_name = lambda upper=upper: upper
        elif getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
        if sections and cmd.name == "analyze" and param.name in ("only", "skip"):
            # A job's sections are the job registry's (a job analysis added there is listed).
            text = re.sub(r"a job's: [^)]*", f"a job's: {', '.join(job_section_names())}", param.help or "")
            param.help = f"{text}: {', '.join(section_names())}"
    make_help = cmd.get_help_option

    def help_option(ctx: Any) -> Any:
        option = make_help(ctx)
        if option is not None:
            option.metavar = ""
        return option

    cmd.get_help_option = help_option


def reflow(text: str) -> str:
    """A docstring's paragraphs as one line each, so that help wraps at the terminal's width
    rather than where the source was wrapped; list items and indented lines stay as written."""
    paragraphs = []
    for para in text.strip().split("\n\n"):
        lines = para.splitlines()
        kept = any(line.startswith((" ", "-", "*", "\b")) for line in lines)
        paragraphs.append(para if kept else " ".join(line.strip() for line in lines))
    return "\n\n".join(paragraphs)


def job_section_names() -> list[str]:
    from traceinsight.api import JOB_SECTIONS

    return list(JOB_SECTIONS)


def section_names() -> list[str]:
    from traceinsight.api import ANALYSES

    return [spec.name for spec in ANALYSES]


def build_command(*, sections: bool = True) -> Any:
    """The click command behind ``app``, its help tidied (see ``_plain_help``).

    ``sections=False`` leaves the section names out of the help, which needs the analysis
    modules (and polars) loaded: only worth it when help is shown."""
    import typer.main

    command = typer.main.get_command(app)
    _plain_help(command, sections=sections)
    return command


def _wants_help(args: list[str]) -> bool:
    return "--help" in args or "-h" in args


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs the app, prints library errors as one line, returns the exit code."""
    args = sys.argv[1:] if argv is None else argv
    _state["verbose"] = "-v" in args or "--verbose" in args
    try:
        command = build_command(sections=_wants_help(args) and "analyze" in args)
        returned = command.main(args=args, prog_name="traceinsight", standalone_mode=False)
    except TraceInsightError as exc:
        if _state["verbose"]:
            raise
        typer.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except _EXITS as exc:
        return int(getattr(exc, "exit_code", 0) or 0)
    except _ABORTS:
        typer.echo("aborted", err=True)
        return 130
    except _CLI_ERRORS as exc:
        exc.show()  # type: ignore[attr-defined]
        return EXIT_USAGE if isinstance(exc, _USAGE_ERRORS) else int(getattr(exc, "exit_code", 1))
    except KeyboardInterrupt:
        return 130
    # Without standalone mode, `raise typer.Exit(n)` inside a command comes back as n.
    return returned if isinstance(returned, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
