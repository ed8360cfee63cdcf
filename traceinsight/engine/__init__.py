"""Where per-trace work runs: in this process, a local process pool, or Ray tasks."""

from traceinsight.engine.run import ENGINES, EngineError, TaskOutcome, run_per_rank

__all__ = ["ENGINES", "EngineError", "TaskOutcome", "run_per_rank"]
