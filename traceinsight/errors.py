"""Errors the library raises on purpose; the CLI turns each into one line and an exit code."""

from __future__ import annotations

from pathlib import Path

EXIT_OK = 0
EXIT_DATA_ERROR = 1
EXIT_USAGE = 2
EXIT_REGRESSION = 3
EXIT_PARTIAL = 4  # a job or series was analysed, but some of its files could not be


class TraceInsightError(Exception):
    """Base of every error that is the user's data or usage, not a bug in traceinsight."""

    exit_code = EXIT_DATA_ERROR


class TraceFormatError(TraceInsightError):
    """A trace file could not be read as a Kineto/Chrome trace."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class UsageError(TraceInsightError):
    """The user asked for something that cannot be done as asked."""

    exit_code = EXIT_USAGE


class AnalysisFailed(TraceInsightError):
    """An analysis raised on a trace: a trace it was not built for, or a bug. Every command
    stops on it with one line naming the trace and the analysis (``-v`` shows the traceback);
    none turns it into a quiet line of its report."""

    def __init__(self, path: str, analysis: str, exc: BaseException) -> None:
        self.path = path
        self.analysis = analysis
        super().__init__(f"{path}: the {analysis} analysis failed ({type(exc).__name__}: {exc})")


class CaptureError(TraceInsightError):
    """Capturing a trace failed for a reason the user can act on."""
