"""Where per-trace work runs: in this process, a local process pool, or Ray tasks."""

from traceinsight.engine.run import ENGINES, run_per_rank
from traceinsight.engine.tasks import EngineError, TaskOutcome

__all__ = ["ENGINES", "EngineError", "TaskOutcome", "run_per_rank"]
