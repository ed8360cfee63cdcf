"""The typer application and the one top-level error handler every command goes through."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

# polars' bundled allocator (jemalloc) keeps freed pages for a while before returning them,
# first as "dirty" pages and then as "muzzy" ones, which are MADV_FREE'd and still count as
# resident until the kernel needs them. Loading a big trace frees and reallocates hundreds of
# MB in steps, so a short dirty decay and no muzzy stage lower the peak resident memory. On
# the 453 MB benchmark trace (five interleaved runs each), peak RSS was 545–608 MB with
# 10/0 ms against 835–850 MB with the earlier 200/200 ms, at the same speed; 0/0 gives
# ~470 MB but faults pages in again and again (+40 % page faults, about +0.25 s). It is read
# once, when polars loads, so it is set here, before any command imports polars; a value the
# user set wins. Library and notebook users set it themselves (see docs/trace-model.md).
if "polars" not in sys.modules:
    os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:10,muzzy_decay_ms:0")

import typer

from traceinsight.errors import EXIT_USAGE, TraceInsightError
from traceinsight.version import __version__

app = typer.Typer(
    name="traceinsight",
    help="Turn PyTorch profiler traces into answers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

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

# Set by the root callback; read by main() to decide whether a traceback is shown.
_state = {"verbose": False}


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"traceinsight {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="Show full tracebacks on errors.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    _state["verbose"] = verbose


# One module per command; importing a module registers its command on `app`.
_COMMAND_MODULES = ("analyze", "gaps", "bound", "diff", "compare", "compile", "whatif", "memory", "export", "sql", "capture", "mcp")


def _register_commands() -> None:
    import importlib

    # A misspelled or missing module is an error here, not a command that silently vanishes.
    for name in _COMMAND_MODULES:
        importlib.import_module(f"traceinsight.cli.{name}")


_register_commands()


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
            param.help = f"{param.help}: {', '.join(section_names())}"
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


def section_names() -> list[str]:
    from traceinsight.analysis.core.registry import ANALYSES

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
